# Applies the cluster object whose manifest comes on stdin (never on a
# command line: it may hold a secret). Prints kubectl's output.
{{.Kubectl}} apply -f -
