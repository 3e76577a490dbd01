package etcdbackup

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// etcdFlags reads kubeadm's etcd manifest's --name=value flags.
func etcdFlags(manifest []byte) (map[string]string, error) {
	var pod corev1.Pod
	if err := yaml.Unmarshal(manifest, &pod); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range pod.Spec.Containers {
		for _, a := range append(append([]string{}, c.Command...), c.Args...) {
			if k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok && strings.HasPrefix(a, "--") {
				out[k] = v
			}
		}
	}
	for _, k := range []string{"name", "initial-advertise-peer-urls", "data-dir"} {
		if out[k] == "" {
			return nil, fmt.Errorf("the etcd manifest has no --%s", k)
		}
	}
	return out, nil
}

var (
	initialCluster      = regexp.MustCompile(`(?m)^(\s*- )--initial-cluster=\S*$`)
	initialClusterState = regexp.MustCompile(`(?m)^\s*- --initial-cluster-state=\S*\n`)
)

// joiningManifest is kubeadm's etcd manifest of a member that joins an
// existing cluster, made from the node's own: --initial-cluster lists
// the members as they are now (kubeadm's join writes the same), and
// --initial-cluster-state=existing. Every other byte stays, so nothing
// else of the node's etcd changes.
func joiningManifest(manifest []byte, cluster string) ([]byte, error) {
	s := string(manifest)
	if !initialCluster.MatchString(s) {
		return nil, fmt.Errorf("the etcd manifest has no --initial-cluster flag")
	}
	s = initialClusterState.ReplaceAllString(s, "")
	s = initialCluster.ReplaceAllString(s, "${1}--initial-cluster="+cluster+"\n${1}--initial-cluster-state=existing")
	return []byte(s), nil
}
