# homelab: dataplane/agents
set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
# Whether the cluster runs Cilium's agents: prints their DaemonSet's name
# (.DaemonSet in .Namespace), nothing when there is none (the user's own
# CNI). Fails when the API does not answer.
kubectl --kubeconfig /etc/kubernetes/admin.conf -n 'kube-system' get daemonset 'cilium' --ignore-not-found -o name
