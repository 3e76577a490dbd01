// Package ciliumagent stands in for the Cilium agent in the emulated
// homelab, which cannot run it (no eBPF datapath in a namespace). It
// emulates the one effect of the agent a node sees: when the agent's pod
// starts on the node, the agent (once it reaches the API at the address
// the cilium-config ConfigMap names) installs the cilium-cni plugin in
// /opt/cni/bin and writes its CNI configuration, 05-cilium.conflist, to
// /etc/cni/net.d, setting other CNI configurations aside
// (*.cilium_bak) when cni-exclusive is on. containerd then reports its
// network ready and the kubelet its Node Ready.
//
// Not emulated: the datapath (no pod traffic flows, Services are not
// load-balanced), endpoints, identities, policies, the agent's health
// checks, and its watch on the CNI directory (the real agent rewrites a
// removed configuration; here it comes back when the agent pod restarts).
package ciliumagent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/homelab-dev/homelab/infra/cniconf"
	"github.com/homelab-dev/homelab/roles/cilium"
)

// What identifies the agent and its configuration, as Cilium's chart
// names them.
const (
	Namespace  = cilium.Namespace
	DaemonSet  = cilium.AgentDaemonSet
	AppLabel   = "k8s-app"
	AppValue   = "cilium"
	ConfigMap  = cilium.ConfigMap
	ConfigFile = cilium.ConfigFile
	// hostPrefix is where the agent's pod mounts the node's root.
	hostPrefix = "/host"
)

// Conflist is what the agent writes (Cilium's default CNI configuration).
const Conflist = `{
  "cniVersion": "0.3.1",
  "name": "cilium",
  "plugins": [
    {
       "type": "cilium-cni",
       "enable-debug": false,
       "log-file": "/var/run/cilium/cilium-cni.log"
    }
  ]
}
`

// plugin is what the agent's install-cni-binaries init container puts in
// /opt/cni/bin: here a plugin that refuses, saying why (CNI's error
// format), should anything run it.
const plugin = `#!/bin/sh
# cilium-cni stand-in of the emulated homelab: no Cilium datapath runs here.
echo '{"cniVersion":"0.3.1","code":100,"msg":"cilium-cni stand-in of the emulated homelab: no Cilium datapath"}'
exit 1
`

// Agent is the stand-in.
type Agent struct {
	Client kubernetes.Interface
	// TLS verifies the API server (the kubelet's CA).
	TLS *tls.Config
	// APIServer is host:port the agent uses when cilium-config names no
	// k8s-service-host (the real agent would then use the kubernetes
	// Service, which needs kube-proxy: the lab has no Service datapath).
	APIServer string
	// Dial opens connections; nil dials from this node.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Root prefixes the node paths written ("" is /).
	Root string
	Logf func(format string, args ...any)
}

// Match reports whether pod is an agent pod of Cilium's DaemonSet.
func (a *Agent) Match(pod *corev1.Pod) bool {
	if pod.Namespace != Namespace || pod.Labels[AppLabel] != AppValue {
		return false
	}
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Name == DaemonSet {
			return true
		}
	}
	return false
}

// Settings are the keys of cilium-config the stand-in acts on.
type Settings struct {
	ServiceHost, ServicePort string
	// ConfPath is the node path of the CNI configuration to write.
	ConfPath  string
	Exclusive bool
}

// SettingsFrom reads cilium-config's data as the agent does.
func SettingsFrom(data map[string]string) Settings {
	s := Settings{
		ServiceHost: data["k8s-service-host"],
		ServicePort: data["k8s-service-port"],
		ConfPath:    filepath.Join(cniconf.ConfDir, ConfigFile),
		Exclusive:   data["cni-exclusive"] != "false",
	}
	if p := data["write-cni-conf-when-ready"]; p != "" {
		s.ConfPath = strings.TrimPrefix(p, hostPrefix)
	}
	if s.ServicePort == "" {
		s.ServicePort = "443"
	}
	return s
}

// Start is the agent starting on the node: a failure (the API unreachable
// at the configured address) is the agent crashing, and nothing is
// written, as the real agent writes the configuration only once ready.
func (a *Agent) Start(ctx context.Context, pod *corev1.Pod) error {
	cm, err := a.Client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ConfigMap, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading ConfigMap %s: %w", ConfigMap, err)
	}
	s := SettingsFrom(cm.Data)
	addr, err := a.ready(ctx, s)
	if err != nil {
		return err
	}
	if err := a.install(s); err != nil {
		return err
	}
	if a.Logf != nil {
		a.Logf("cilium agent stand-in: API reached at %s; wrote %s", addr, s.ConfPath)
	}
	return nil
}

// ready is the agent's start: it reaches the API at the address
// cilium-config names, else at APIServer, or fails as the agent does.
func (a *Agent) ready(ctx context.Context, s Settings) (string, error) {
	addr := a.APIServer
	if s.ServiceHost != "" {
		addr = net.JoinHostPort(s.ServiceHost, s.ServicePort)
	}
	if err := a.reachAPI(ctx, addr); err != nil {
		return addr, fmt.Errorf("unable to contact k8s api-server at %s: %w", addr, err)
	}
	return addr, nil
}

// reachAPI asks the API server's /readyz (anonymous, as kubeadm allows).
func (a *Agent) reachAPI(ctx context.Context, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	cfg := &tls.Config{}
	if a.TLS != nil {
		cfg = a.TLS.Clone()
	}
	cfg.ServerName = host
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	if a.Dial != nil {
		tr.DialContext = a.Dial
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/readyz", nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %s", resp.Status)
	}
	return nil
}

func (a *Agent) install(s Settings) error {
	if err := installPlugin(a.Root); err != nil {
		return err
	}
	return a.writeConf(s, Conflist)
}

// installPlugin is the install-cni-binaries init container's work.
func installPlugin(root string) error {
	return writeFile(filepath.Join(root, cniconf.BinDir, "cilium-cni"), plugin, 0o755)
}

// writeConf writes the CNI configuration conf once the agent is ready.
func (a *Agent) writeConf(s Settings, conf string) error {
	path := filepath.Join(a.Root, s.ConfPath)
	if s.Exclusive {
		// cni.exclusive: other networks' configurations are set aside, so
		// containerd takes Cilium's whatever their names.
		entries, err := os.ReadDir(filepath.Dir(path))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		var list []cniconf.Entry
		for _, e := range entries {
			list = append(list, cniconf.Entry{Name: e.Name(), IsDir: e.IsDir()})
		}
		for _, name := range cniconf.Candidates(list) {
			if name == filepath.Base(path) {
				continue
			}
			p := filepath.Join(filepath.Dir(path), name)
			if err := os.Rename(p, p+".cilium_bak"); err != nil {
				return err
			}
		}
	}
	return writeFile(path, conf, 0o644)
}

func writeFile(p, content string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), mode); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
