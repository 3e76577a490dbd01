# Whether the cluster runs Cilium's agents: prints their DaemonSet's name
# (.DaemonSet in .Namespace), nothing when there is none (the user's own
# CNI). Fails when the API does not answer.
{{.Kubectl}} -n {{q .Namespace}} get daemonset {{q .DaemonSet}} --ignore-not-found -o name
