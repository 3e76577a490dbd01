# Deletes the join token .ID's Secret once its join is over (gone already
# is fine). Prints nothing.
{{.Kubectl}} -n kube-system delete secret bootstrap-token-{{q .ID}} --ignore-not-found >/dev/null
