package cri

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/homelab-dev/homelab/infra/cniconf"
)

// DefaultSandboxDir holds the sandboxes of pods the kubelet stand-in
// starts from the API. Under /run, as containerd's state is: they survive
// restarts of the runtime and the kubelet, not a reboot.
const DefaultSandboxDir = "/run/containerd/homelab-standin/sandboxes"

// podSandbox is a pod sandbox the kubelet asked for. Nothing runs in it:
// what it holds is the decision containerd would have made (runtime
// handler, network set up, the address the CNI plugin gave).
type podSandbox struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	UID         string            `json:"uid"`
	Attempt     uint32            `json:"attempt"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	HostNetwork bool              `json:"hostNetwork"`
	Handler     string            `json:"handler,omitempty"`
	IP          string            `json:"ip,omitempty"`
	Network     string            `json:"network,omitempty"`
	Created     time.Time         `json:"created"`
	Stopped     bool              `json:"stopped,omitempty"`
}

func (s *server) sandboxPath(id string) string { return filepath.Join(s.c.SandboxDir, id+".json") }

func (s *server) saveSandbox(sb podSandbox) error {
	if err := os.MkdirAll(s.c.SandboxDir, 0o700); err != nil {
		return err
	}
	data, _ := json.Marshal(sb)
	tmp := s.sandboxPath(sb.ID) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.sandboxPath(sb.ID))
}

func (s *server) podSandboxes() []podSandbox {
	files, _ := filepath.Glob(filepath.Join(s.c.SandboxDir, "*.json"))
	var out []podSandbox
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var sb podSandbox
		if json.Unmarshal(data, &sb) == nil && sb.ID != "" {
			out = append(out, sb)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

func (s *server) findPodSandbox(id string) (podSandbox, bool) {
	for _, sb := range s.podSandboxes() {
		if id != "" && strings.HasPrefix(sb.ID, id) {
			return sb, true
		}
	}
	return podSandbox{}, false
}

// podCIDRPath keeps what the kubelet last set with UpdateRuntimeConfig.
func (s *server) podCIDRPath() string { return filepath.Join(filepath.Dir(s.c.SandboxDir), "pod-cidr") }

func (s *server) podCIDR() string {
	b, _ := os.ReadFile(s.podCIDRPath())
	return strings.TrimSpace(string(b))
}

// runPodSandbox decides as containerd does whether a sandbox can start:
// its runtime handler, then (pod network only) the CNI network: loaded,
// its plugins installed, an address from the node's pod CIDR.
func (s *server) runPodSandbox(req *runtimeapi.RunPodSandboxRequest) (podSandbox, error) {
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	sb := podSandbox{
		ID:          randomID(),
		Name:        md.GetName(),
		Namespace:   md.GetNamespace(),
		UID:         md.GetUid(),
		Attempt:     md.GetAttempt(),
		Labels:      cfg.GetLabels(),
		Annotations: cfg.GetAnnotations(),
		HostNetwork: cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE,
		Handler:     req.GetRuntimeHandler(),
		Created:     time.Now(),
	}
	rc := s.runtimeConfig()
	if err := rc.sandboxRuntime(sb.Handler, fileExists); err != nil {
		return sb, err
	}
	if sb.HostNetwork {
		return sb, s.saveSandbox(sb)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	network, err := cniconf.Load(rc.CNIConfDir)
	if err != nil {
		return sb, fmt.Errorf("failed to setup network for sandbox %q: %w", sb.ID, cniconf.ErrNotInitialized)
	}
	sb.Network = network.Name
	fail := func(plugin, format string, args ...any) error {
		return fmt.Errorf("failed to setup network for sandbox %q: plugin type=%q name=%q failed (add): %s", sb.ID, plugin, network.Name, fmt.Sprintf(format, args...))
	}
	for _, p := range network.Plugins {
		found := false
		for _, d := range rc.CNIBinDirs {
			found = found || fileExists(filepath.Join(d, p))
		}
		if !found {
			return sb, fail(p, "failed to find plugin %q in path [%s]", p, strings.Join(rc.CNIBinDirs, " "))
		}
	}
	var used []string
	for _, o := range s.podSandboxes() {
		if !o.Stopped && o.IP != "" {
			used = append(used, o.IP)
		}
	}
	ip, err := allocate(s.podCIDR(), used)
	if err != nil {
		return sb, fail(network.Plugins[0], "%v", err)
	}
	sb.IP = ip
	return sb, s.saveSandbox(sb)
}

// allocate gives the lowest address of cidr that is free, leaving out the
// network address and the first host (the pod network's router).
func allocate(cidr string, used []string) (string, error) {
	if cidr == "" {
		return "", errors.New("no pod CIDR is assigned to this node: no address to allocate")
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", fmt.Errorf("pod CIDR %q: %v", cidr, err)
	}
	taken := map[string]bool{}
	for _, u := range used {
		taken[u] = true
	}
	a := p.Masked().Addr().Next().Next()
	for ; p.Contains(a); a = a.Next() {
		if !taken[a.String()] && p.Contains(a.Next()) { // not the broadcast address
			return a.String(), nil
		}
	}
	return "", fmt.Errorf("pod CIDR %s is exhausted", cidr)
}

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
