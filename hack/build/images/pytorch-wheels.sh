#!/bin/sh
# Runs inside the mpi-pytorch image's root while it is built (hack/build/build-images.sh): builds Horovod and
# DeepSpeed from their PyPI source distributions (in /tmp/build, fetched on the host with their hashes checked)
# against Debian trixie's PyTorch and Open MPI 5, installs the two wheels into /usr/local and strips their
# libraries. The build toolchain is purged afterwards by the recipe; nothing else is fetched here.
set -eu
cd /tmp/build
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 MAKEFLAGS="-j$(nproc)"

# Horovod 0.28.1 (its last release, 2023) on MPI and PyTorch only, CPU. Three fixes for today's toolchain:
# PyTorch 2.x headers need C++17 (Horovod sets 14); GCC 14 rejects the assignment to const members in the
# bundled flatbuffers' span::operator=, which nothing calls (flatbuffers 2.0.8 deleted it too); and Python 3.12
# removed distutils, which horovod/torch/CMakeLists.txt asks for the Python include directory. GCC 14 also no
# longer includes <stdexcept> and <cstdint> through other headers: CXXFLAGS adds them.
tar xzf horovod-*.tar.gz
(
  cd horovod-*/
  sed -i 's/CMAKE_CXX_STANDARD 14/CMAKE_CXX_STANDARD 17/' CMakeLists.txt horovod/torch/CMakeLists.txt
  sed -i '/span &operator=(const span &other)/,/^  }/d' third_party/flatbuffers/include/flatbuffers/stl_emulation.h
  sed -i 's/from distutils.sysconfig import get_python_inc; print(get_python_inc())/import sysconfig; print(sysconfig.get_paths()[\\"include\\"])/' \
    horovod/torch/CMakeLists.txt
  HOROVOD_WITH_MPI=1 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
  HOROVOD_WITHOUT_GLOO=1 CXXFLAGS="-include stdexcept -include cstdint" \
    pip wheel --quiet --no-deps --no-build-isolation -w /tmp/build/wheels .
)

# DeepSpeed's Python code plus the one compiled op that its CPU accelerator loads at init_distributed (the
# shared-memory collectives): built now, so the image needs no compiler (it would JIT-compile it at every start).
tar xzf deepspeed-*.tar.gz
(cd deepspeed-*/ && DS_ACCELERATOR=cpu DS_BUILD_OPS=0 DS_BUILD_SHM_COMM=1 \
  pip wheel --quiet --no-deps --no-build-isolation -w /tmp/build/wheels .)

pip install --quiet --no-deps --break-system-packages --root-user-action=ignore /tmp/build/wheels/*.whl
find /usr/local/lib/python3*/dist-packages -name '*.so' -exec strip --strip-debug {} +
python3 -c 'import horovod.torch, deepspeed; print("horovod", horovod.__version__, "deepspeed", deepspeed.__version__)'
