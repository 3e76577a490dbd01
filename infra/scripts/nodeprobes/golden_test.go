package nodeprobes

import (
	"testing"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/scripts/scriptstest"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// The probes as a node receives them.
func TestScriptsGolden(t *testing.T) {
	scriptstest.Golden(t, Expiry(), "")
	scriptstest.Golden(t, Probe(), "")
	scriptstest.Golden(t, Live(), "")
	scriptstest.Golden(t, KubeletClient(), "")
	scriptstest.Golden(t, FileStats([]string{"/etc/sysctl.d/90-homelab.conf", "/etc/it's here"}), "")
	scriptstest.Golden(t, State([]string{nodefacts.JoinMarker, nodefacts.InitMarker}, nodefacts.KubeletConf), "")
	scriptstest.Golden(t, Presence(nodefacts.Files(nodefacts.AdminConf)...), "")
	scriptstest.Golden(t, Versions(), "")
	scriptstest.Golden(t, Versions(KnownVersion{Tool: "kubelet", Stamp: "/usr/bin/kubelet 1234 56789 2026-01-01 00:00:00.000000000 +0000 2026-01-01 00:00:00.000000000 +0000", Version: "v1.34.4"}), "known")
	scriptstest.Golden(t, scripts.Render("nodefacts/stamps", StampsArgs{Tools: []string{"kubeadm", "kubelet"}}), "")
	scriptstest.Golden(t, scripts.Render("nodefacts/lines", nil), "")
	for name, tr := range map[string]nodefacts.Trace{
		"file": {Path: nodefacts.AdminConf},
		"dir":  {Path: nodefacts.EtcdMemberDir, Kind: nodefacts.Dir},
		"glob": {Path: nodefacts.AnyManifest, Kind: nodefacts.AnyMatch},
	} {
		scriptstest.Golden(t, scripts.Render("nodefacts/trace", TraceAt("", tr)), name)
	}
}
