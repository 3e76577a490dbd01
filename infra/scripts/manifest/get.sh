# Whether the object .Kind .Name (in .Namespace, when namespaced) exists:
# prints its kind/name, or nothing when it does not. Fails when the API
# does not answer.
{{.Kubectl}} get {{q .Kind}} {{q .Name}}{{if .Namespace}} -n {{q .Namespace}}{{end}} -o name --ignore-not-found
