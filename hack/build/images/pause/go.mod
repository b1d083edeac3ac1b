module mpijob-operator.local/pause

go 1.26
