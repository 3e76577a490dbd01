package inventory

import "strings"

// checkContainerRuntime: a managed runtime is containerd, so kubeadm and
// the kubelet must be told containerd's socket.
func checkContainerRuntime(ps *problems, inv *Inventory) {
	c := inv.Cluster
	// A socket that is not a unix one has its own error.
	unix := strings.HasPrefix(c.CRISocket, "unix://") || strings.HasPrefix(c.CRISocket, "/")
	if c.ContainerRuntime.Manage && unix && "unix://"+strings.TrimPrefix(c.CRISocket, "unix://") != DefaultCRISocket {
		ps.errorf("cluster.criSocket", "%q is not containerd's socket, and cluster.containerRuntime.manage: true configures containerd; "+
			"use %s, or manage: false for another runtime", c.CRISocket, DefaultCRISocket)
	}
}
