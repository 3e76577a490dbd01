# Makes the join token .ID's Secret, its manifest on stdin, exist afresh:
# deleted when there, then created, so that the same again after an API
# blip does no harm. The token travels on stdin, never on a command line
# (ps on the node would show it), and `kubectl create` keeps no
# last-applied copy of it. Prints nothing; kubectl's errors go to stderr.
{{.Kubectl}} -n kube-system delete secret bootstrap-token-{{q .ID}} --ignore-not-found >/dev/null
{{.Kubectl}} create -f - >/dev/null
