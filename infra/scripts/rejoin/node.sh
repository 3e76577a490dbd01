# Tells whether the Node .Node exists and is Ready, before a new machine
# joins under its name. Prints its name and Ready status ("gpu-1 True"),
# nothing when there is no such Node; exits non-zero when the API does
# not answer.
{{.Kubectl}} get node {{q .Node}} --ignore-not-found -o jsonpath='{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}'
