# Deletes the object .Kind .Name (in .Namespace, when namespaced); one
# already gone is no failure. Prints kubectl's output.
{{.Kubectl}} delete {{q .Kind}} {{q .Name}}{{if .Namespace}} -n {{q .Namespace}}{{end}} --ignore-not-found
