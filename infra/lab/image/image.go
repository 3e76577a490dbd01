// Package image holds the files every emulated node gets on top of the
// host's own (the host provides Debian's ssh.service and keepalived.service,
// sshd and keepalived themselves):
//
//   - kubelet.service and its kubeadm drop-in, byte for byte as the kubeadm
//     and kubelet .debs from pkgs.k8s.io install them (under
//     /usr/lib/systemd/system), with ExecStart=/usr/bin/kubelet;
//   - containerd.service running /usr/bin/containerd, the CRI stand-in;
//   - /etc/default/keepalived with the flags keepalived needs in a node.
//
// What the lab must do besides writing Files() into the node's tree:
//
//   - install the homelab-node binary as /usr/bin/kubelet,
//     /usr/bin/containerd and /usr/bin/systemctl (hiding the host's systemd
//     systemctl), and start `homelab-node init` as the node's PID 1;
//   - at first boot enable ssh.service and containerd.service, i.e. create
//     /etc/systemd/system/multi-user.target.wants/{ssh,containerd}.service
//     symlinks (or run `systemctl enable ssh containerd` with
//     HOMELAB_INIT_ROOT set to the node's tree). kubelet and keepalived are
//     enabled later by the provisioner, as on real machines;
//   - make sure the node's /etc/systemd/system/multi-user.target.wants holds
//     nothing else it inherited from the host (a Debian host may have
//     postgresql, e2scrub_reap, keepalived...): init starts every service
//     linked there.
package image

import (
	"embed"
	"os"
)

//go:embed files
var files embed.FS

// File is one file to place on a node, Path absolute as on the node.
type File struct {
	Path    string
	Mode    os.FileMode
	Content []byte
}

// A node of the emulated homelab is either a stand-in node (the machine's
// own directories, the homelab-node stand-ins) or a real one (Debian 12
// installed by infra/tools/build-rootfs.sh, with systemd, containerd and
// runc from its packages): each gets the files its kind lacks.
const (
	standIn = 1 << iota
	real
)

var layout = []struct {
	src, dst string
	kinds    int
	mode     os.FileMode
}{
	{"kubelet.service", "/usr/lib/systemd/system/kubelet.service", standIn | real, 0o644},
	{"10-kubeadm.conf", "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", standIn | real, 0o644},
	{"containerd.service", "/usr/lib/systemd/system/containerd.service", standIn, 0o644},
	// Real nodes keep Debian's: keepalived logs to journald and its pid
	// files go to the node's own /run.
	{"keepalived.default", "/etc/default/keepalived", standIn, 0o644},
	// Real nodes keep Debian's containerd config.toml too (runc on
	// cgroupfs, no sandbox image, no mirrors), as a user's fresh machine
	// has it: homelab up writes the one the kubelet needs.
}

// Files returns a stand-in node's files in a fixed order.
func Files() []File { return filesOf(standIn) }

// RealFiles returns a real node's files in a fixed order.
func RealFiles() []File { return filesOf(real) }

func filesOf(kind int) []File {
	var out []File
	for _, l := range layout {
		if l.kinds&kind == 0 {
			continue
		}
		out = append(out, File{Path: l.dst, Mode: l.mode, Content: read(l.src)})
	}
	return out
}

func read(name string) []byte {
	b, err := files.ReadFile("files/" + name)
	if err != nil {
		panic(err) // embedded at build time: cannot be missing
	}
	return b
}
