package provider

// The cluster's API, reached through a control-plane node's admin
// kubeconfig: the helpers several resources share.

import (
	"context"
	"fmt"
	"strings"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// clusterArgs are the values of the scripts that ask the API through a
// control-plane node's admin.conf (cluster/, leave/): Node, where the
// script is about one.
type clusterArgs struct {
	Kubectl string
	Node    string
}

// readClusterUID is the cluster's identity, read through a node whose
// admin.conf the API answers to; "" when the API does not say.
func readClusterUID(ctx context.Context, c ssh.Executor) string {
	out, code, err := query(ctx, c, scripts.Render("cluster/uid", clusterArgs{Kubectl: kubectl}))
	if err != nil || code != 0 {
		return ""
	}
	return strings.TrimSpace(out)
}

const (
	adminConf   = nodefacts.AdminConf
	kubeletConf = nodefacts.KubeletConf
	kubectl     = "kubectl --kubeconfig " + adminConf
)

// clusterClient connects to a control-plane node whose admin.conf the API
// answers to: via, else the first peer that does.
func clusterClient(ctx context.Context, via Connection, peers []Connection) (ssh.Executor, string, error) {
	var problems []string
	readyz := scripts.Render("cluster/readyz", clusterArgs{Kubectl: kubectl})
	for _, conn := range append([]Connection{via}, peers...) {
		if conn.Host == "" {
			continue
		}
		c, err := dial(ctx, conn)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		r, err := outliveBlips(ctx, func() (ssh.Result, error) { return c.Query(ctx, readyz.String()) })
		if err == nil && r.ExitCode == 0 {
			return c, conn.Node, nil
		}
		c.Close()
		problems = append(problems, conn.Node+": the API does not answer there")
	}
	return nil, "", fmt.Errorf("no control-plane node's API answers: %s", strings.Join(problems, "; "))
}

// nodeReady reports whether the cluster has a Node of that name reporting
// Ready.
func nodeReady(ctx context.Context, c ssh.Executor, node string) (bool, error) {
	out, code, err := query(ctx, c, scripts.Render("cluster/node-ready", clusterArgs{Kubectl: kubectl, Node: node}))
	if err != nil {
		return false, err
	}
	if code != 0 {
		return false, fmt.Errorf("reading Node %s through the API failed (exit %d)", node, code)
	}
	return strings.TrimSpace(out) == "True", nil
}
