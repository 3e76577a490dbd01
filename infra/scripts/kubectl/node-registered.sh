# Whether the kubelet of .Node has registered its Node: exits 0 once the
# API has it, non-zero while it has not (or the API does not answer).
# Prints nothing.
{{.Kubectl}} get node {{q .Node}} >/dev/null
