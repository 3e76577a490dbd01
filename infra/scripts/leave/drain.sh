# Drains the worker Node .Node before it leaves the cluster, evicting its
# pods within a minute. Best effort: the removal goes on whatever it
# says. Prints kubectl's output.
{{.Kubectl}} drain {{q .Node}} --ignore-daemonsets --delete-emptydir-data --force --timeout=60s
