package aptrepo

import (
	"crypto/md5"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/homelab-dev/homelab/roles/runtimepkg"
)

// WriteSuite makes dir a repository in Docker's layout (what
// download.docker.com/linux/debian serves): the packages under
// pool/COMPONENT/, their index under dists/SUITE/COMPONENT/binary-ARCH/,
// dists/SUITE/Release listing it, signed inline and apart with key, and
// the key, armoured, as gpg at the top, where Docker's install guide
// fetches it. It replaces what dir held.
func WriteSuite(dir, arch, suite, component string, debs []string, key *Key) error {
	tmp := dir + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	poolDir := filepath.Join("pool", component)
	binary := filepath.Join(component, "binary-"+arch)
	dists := filepath.Join(tmp, "dists", suite)
	for _, d := range []string{filepath.Join(tmp, poolDir), filepath.Join(dists, binary)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	stanzas, err := pool(tmp, filepath.ToSlash(poolDir), debs)
	if err != nil {
		return err
	}
	index, gz, err := packagesIndex(stanzas)
	if err != nil {
		return err
	}
	release := fmt.Sprintf("Origin: homelab emulated homelab\nLabel: Docker CE (emulated homelab)\nSuite: %s\nCodename: %s\nDate: %s\nArchitectures: %s\nComponents: %s\nDescription: the emulated homelab's stand-in for Docker's repository\n",
		suite, suite, time.Now().UTC().Format(time.RFC1123), arch, component)
	md5s, sha256s := "MD5Sum:\n", "SHA256:\n"
	for _, f := range []struct {
		name string
		data []byte
	}{{"Packages", index}, {"Packages.gz", gz}} {
		rel := filepath.ToSlash(filepath.Join(binary, f.name))
		if err := os.WriteFile(filepath.Join(dists, rel), f.data, 0o644); err != nil {
			return err
		}
		m, s := md5.Sum(f.data), sha256.Sum256(f.data)
		md5s += fmt.Sprintf(" %x %d %s\n", m, len(f.data), rel)
		sha256s += fmt.Sprintf(" %x %d %s\n", s, len(f.data), rel)
	}
	if err := os.WriteFile(filepath.Join(dists, "Release"), []byte(release+md5s+sha256s), 0o644); err != nil {
		return err
	}
	if err := key.Sign(dists); err != nil {
		return err
	}
	armored, err := os.ReadFile(key.Armored())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, runtimepkg.KeyFile), armored, 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// ContainerdIO is Docker's containerd.io at version (2.2.9-1) made of
// containerd's own build in dir (infra/tools/build-containerd.sh: the
// daemon, its runc shim, ctr) and runc: one package that takes the place
// of the distribution's containerd and runc, with containerd's unit and
// the config.toml Docker ships, which disables the CRI plugin (a node
// left with it cannot run the kubelet's pods: up's managed config.toml
// replaces it).
func ContainerdIO(version, dir, runc string) Spec {
	return Spec{
		Name: runtimepkg.DockerPackage, Version: version, Section: "devel",
		Provides: "containerd, runc", Conflicts: "containerd, runc", Replaces: "containerd, runc",
		Description: "An open and reliable container runtime (the emulated homelab's stand-in for Docker's package, built from containerd's own release)",
		Postinst:    containerdIOPostinst,
		Files: []File{
			{Path: "/usr/bin/containerd", Mode: 0o755, Src: filepath.Join(dir, "containerd")},
			{Path: "/usr/bin/containerd-shim-runc-v2", Mode: 0o755, Src: filepath.Join(dir, "containerd-shim-runc-v2")},
			{Path: "/usr/bin/ctr", Mode: 0o755, Src: filepath.Join(dir, "ctr")},
			{Path: "/usr/bin/runc", Mode: 0o755, Src: runc},
			{Path: "/lib/systemd/system/containerd.service", Mode: 0o644, Content: []byte(containerdUnit)},
			{Path: "/etc/containerd/config.toml", Mode: 0o644, Content: []byte(dockerConfig), Conffile: true},
		},
	}
}

// containerdIOPostinst enables and starts containerd, as the package's
// does (deb-systemd-helper and deb-systemd-invoke), where systemd runs.
const containerdIOPostinst = `#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload
	systemctl enable containerd.service >/dev/null 2>&1 || true
	systemctl restart containerd.service || true
fi
`

// containerdUnit is containerd's own containerd.service, as
// containerd.io installs it.
const containerdUnit = `[Unit]
Description=containerd container runtime
Documentation=https://containerd.io
After=network.target dbus.service

[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
`

// dockerConfig is what containerd.io's config.toml says: Docker Engine
// needs no CRI, so it is disabled.
const dockerConfig = `# containerd.io's own: the CRI plugin off, as Docker Engine needs none.
disabled_plugins = ["cri"]
`
