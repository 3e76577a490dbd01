package etcdbackup

import (
	"fmt"
	"regexp"

	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// etcdFlags reads the flags of kubeadm's etcd manifest that a restore
// needs.
func etcdFlags(manifest []byte) (map[string]string, error) {
	out, err := nodefacts.ManifestFlags(manifest)
	if err != nil {
		return nil, err
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
