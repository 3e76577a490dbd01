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

var layout = []struct {
	src, dst string
}{
	{"kubelet.service", "/usr/lib/systemd/system/kubelet.service"},
	{"10-kubeadm.conf", "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"},
	{"containerd.service", "/usr/lib/systemd/system/containerd.service"},
	{"keepalived.default", "/etc/default/keepalived"},
}

// Files returns the node files in a fixed order.
func Files() []File {
	out := make([]File, 0, len(layout))
	for _, l := range layout {
		b, err := files.ReadFile("files/" + l.src)
		if err != nil {
			panic(err) // embedded at build time: cannot be missing
		}
		out = append(out, File{Path: l.dst, Mode: 0o644, Content: b})
	}
	return out
}
