package stack

import (
	"context"
	"strconv"
	"strings"

	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// checkHardening: every apiserver writes its audit log, in which a Secret
// written appears at Metadata, without its value; profiling is off on
// every control-plane component, and the apiserver serves no profile.
func (e *e2e) checkHardening(ctx context.Context, s *Stack) {
	t := e.t
	t.Helper()
	const kubectl = "kubectl --kubeconfig " + nodefacts.AdminConf
	const value = "audit-probe-value-never-logged"
	e.node(ctx, "cp-1", kubectl+" -n default create secret generic audit-probe --from-literal=v="+value)
	defer e.node(ctx, "cp-1", kubectl+" -n default delete secret audit-probe --ignore-not-found")
	logged := false
	for _, cp := range s.Inv.ControlPlanes() {
		lines, _ := strconv.Atoi(strings.TrimSpace(e.node(ctx, cp.Name, "cat "+kubeadm.AuditLog+" | wc -l")))
		if lines == 0 {
			t.Errorf("%s: no audit log at %s", cp.Name, kubeadm.AuditLog)
		}
		out := e.node(ctx, cp.Name, "grep -h audit-probe "+kubeadm.AuditLog+" || true")
		if strings.Contains(out, value) {
			t.Errorf("%s: the audit log holds a Secret's value:\n%s", cp.Name, out)
		}
		if strings.Contains(out, `"level":"Metadata"`) && strings.Contains(out, `"verb":"create"`) {
			logged = true
		}
		manifests := e.node(ctx, cp.Name, "cat "+nodefacts.ManifestsDir+"/kube-apiserver.yaml "+nodefacts.ManifestsDir+"/kube-controller-manager.yaml "+nodefacts.ManifestsDir+"/kube-scheduler.yaml")
		if n := strings.Count(manifests, "--profiling=false"); n != 3 {
			t.Errorf("%s: --profiling=false in %d of the 3 control-plane manifests", cp.Name, n)
		}
	}
	if !logged {
		t.Error("creating a Secret left no Metadata entry in any apiserver's audit log")
	}
	if out, err := e.lab.Run(ctx, "cp-1", kubectl+" get --raw /debug/pprof/ 2>&1"); err == nil || !strings.Contains(out, "NotFound") && !strings.Contains(out, "could not find") {
		t.Errorf("the apiserver serves /debug/pprof/: %v\n%s", err, out)
	}
}
