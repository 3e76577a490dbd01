# Drains the Node .Node before its kubelet is upgraded: its pods evicted,
# PodDisruptionBudgets honoured, within .Timeout. Prints kubectl's
# output; fails when the drain does not finish in time.
{{.Kubectl}} drain {{q .Node}} --ignore-daemonsets --delete-emptydir-data --timeout={{q .Timeout}}
