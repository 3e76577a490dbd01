# Reads the Node objects .Names as JSON: one object alone, several as a
# List, a Node that does not exist left out (nothing at all when none
# does). Fails when the API does not answer.
{{.Kubectl}} get node {{qs .Names}} -o json --ignore-not-found
