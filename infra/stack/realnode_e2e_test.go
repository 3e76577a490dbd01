package stack

import (
	"context"
	"regexp"
	"strings"

	"github.com/homelab-dev/homelab/infra/doctor"
	"github.com/homelab-dev/homelab/infra/lab"
)

// withMACs declares each node's MAC as the lab gives it (lab.AddressMAC),
// which inventory/lab.yaml leaves out for real nodes' sake: a stand-in
// node ignores netplan, and tests of what a MAC tells (doctor finding a
// re-addressed node, a replaced machine's new MAC) need it declared.
func withMACs(s string) string {
	flow := regexp.MustCompile(`(\{name: [^}]*address: ([0-9.]+))(, interface: )`)
	s = flow.ReplaceAllStringFunc(s, func(m string) string {
		g := flow.FindStringSubmatch(m)
		return g[1] + `, mac: "` + lab.AddressMAC(g[2]) + `"` + g[3]
	})
	block := regexp.MustCompile(`(?m)^( +)address: ([0-9.]+)\n`)
	return block.ReplaceAllStringFunc(s, func(m string) string {
		g := block.FindStringSubmatch(m)
		return m + g[1] + `mac: "` + lab.AddressMAC(g[2]) + `"` + "\n"
	})
}

// withoutMACs drops the nodes' MACs from an inventory: netplan matches a
// NIC's permanent MAC, which a lab NIC (a veth) does not have, so a real
// node's netplan file must match eth0 by name (docs/lab.md).
func withoutMACs(s string) string {
	return regexp.MustCompile(`(, mac: "[^"]*"|\n\s+mac: "[^"]*")`).ReplaceAllString(s, "")
}

// checkRealNodes checks what only real nodes (Debian 12, systemd,
// containerd, runc, the real kubelet; docs/lab.md, "Real nodes") show of
// the default cluster homelab up built: kubeadm's static pods (etcd, the
// API server, the controller manager, the scheduler) run as real
// containers from the lab's registry under the real kubelet, keepalived
// holds the VIP under systemd, the workers joined with their kubelets'
// TLS bootstrap, the lab's Cilium agent runs on each node as a real
// container and sets up the pod network (the reference plugins, and
// routes to every other node's pods), kube-proxy programs its Services
// into the node's nf_tables, every node's address is networkd's static
// one, and CoreDNS's pods answer from another node directly and through
// their Service.
func (e *e2e) checkRealNodes(ctx context.Context, s *Stack) {
	t := e.t
	t.Helper()
	// Every node's address is homelab's static one, applied: networkd
	// configures eth0 from its netplan file, not from a lease.
	for _, n := range []string{"cp-1", "cp-2", "cp-3", "gpu-1", "gpu-2", "gpu-3", "gpu-4"} {
		got := e.node(ctx, n, `networkctl status eth0 --no-pager 2>/dev/null | awk -F': ' '/Network File:/ { print $2 }'; systemctl is-active systemd-networkd; ip -o -4 addr show dev eth0 | grep -c dynamic || true`)
		if want := "/run/systemd/network/10-netplan-eth0.network\nactive\n0\n"; got != want {
			t.Errorf("%s: eth0 %q, want %q", n, got, want)
		}
	}
	// doctor says so too, from the nodes' own netplan and networkd.
	rep := e.doctor(ctx, s.Inv, s.Bundle)
	netplanRows := 0
	for _, f := range rep.Findings {
		if f.Check == "netplan" {
			netplanRows++
			if f.Status != doctor.OK {
				t.Errorf("doctor's netplan row for %s: %s %s", f.Where, f.Status, f.Detail)
			}
		}
	}
	if netplanRows != 7 {
		t.Errorf("doctor has %d netplan rows, want one per node", netplanRows)
	}
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		got := e.node(ctx, n, `cat /proc/1/comm; for c in etcd kube-apiserver kube-controller-manager kube-scheduler; do ctr --namespace k8s.io containers ls --quiet "labels.\"io.kubernetes.container.name\"==$c" | head -n 1 | grep -q . && echo "$c"; done; systemctl is-active keepalived`)
		if want := "systemd\netcd\nkube-apiserver\nkube-controller-manager\nkube-scheduler\nactive\n"; got != want {
			t.Errorf("%s: %q, want %q", n, got, want)
		}
	}
	// A worker's real kubelet, its client certificate from the TLS
	// bootstrap; the agent a real container, the CNI configuration its
	// work.
	if got := e.node(ctx, "gpu-4", "cat /proc/1/comm; systemctl is-active kubelet; readlink /var/lib/kubelet/pki/kubelet-client-current.pem"); !strings.Contains(got, "systemd\nactive\n/var/lib/kubelet/pki/kubelet-client-") {
		t.Errorf("gpu-4's kubelet: %q", got)
	}
	agent := e.node(ctx, "gpu-4", `ctr --namespace k8s.io containers ls --quiet 'labels."io.kubernetes.container.name"==cilium-agent'`)
	if strings.TrimSpace(agent) == "" {
		t.Errorf("no cilium-agent container in gpu-4's containerd")
	}
	if got := e.node(ctx, "gpu-4", "ls /etc/cni/net.d"); !strings.Contains(got, "05-cilium.conflist") {
		t.Errorf("gpu-4's /etc/cni/net.d: %q", got)
	}
	// kube-proxy programs the kubernetes Service on every node.
	for _, n := range []string{"cp-1", "gpu-4"} {
		if got := e.node(ctx, n, "iptables -t nat -S KUBE-SERVICES"); !strings.Contains(got, "default/kubernetes:https cluster IP") {
			t.Errorf("%s's KUBE-SERVICES: %q", n, got)
		}
	}
	// Pods on the pod network: CoreDNS (a Deployment, on the control
	// planes) turns Ready, its pods answer from another node over the pod
	// network, and through the kube-dns Service's cluster IP by
	// kube-proxy's rules.
	if out, err := e.lab.Run(ctx, "cp-1", labKubectl+"-n kube-system rollout status deployment/coredns --timeout=180s"); err != nil {
		t.Fatalf("CoreDNS is not ready on the pod network: %v\n%s\n%s", err, out, e.node(ctx, "cp-1", labKubectl+"-n kube-system describe pods -l k8s-app=kube-dns | tail -n 30"))
	}
	ips := strings.Fields(e.node(ctx, "cp-1", labKubectl+"-n kube-system get pods -l k8s-app=kube-dns -o jsonpath='{.items[*].status.podIP}'"))
	if len(ips) == 0 {
		t.Fatal("no CoreDNS pod address")
	}
	for _, ip := range ips {
		if got := e.node(ctx, "gpu-4", "curl -sS --max-time 5 http://"+ip+":8080/health"); got != "OK" {
			t.Errorf("CoreDNS at %s from gpu-4: %q", ip, got)
		}
	}
	dnsIP := strings.TrimSpace(e.node(ctx, "cp-1", labKubectl+"-n kube-system get service kube-dns -o jsonpath='{.spec.clusterIP}'"))
	if got := e.node(ctx, "gpu-4", "curl -sS --max-time 5 http://"+dnsIP+":9153/metrics | grep -c '^coredns_build_info'"); strings.TrimSpace(got) != "1" {
		t.Errorf("CoreDNS through the kube-dns Service at %s from gpu-4: %q", dnsIP, got)
	}
}
