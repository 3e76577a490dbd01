package roles

// The real programs are the oracles: kubeadm must accept every kubeadm file
// we render and sign the API certificate for every address we declare;
// keepalived must accept every keepalived.conf.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/homelab-dev/homelab/infra/tools"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"github.com/homelab-dev/homelab/inventory"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/pki"
)

func TestKubeadmValidatesEveryConfig(t *testing.T) {
	kubeadmBin := toolstest.Require(t, "kubeadm")
	b := testBundle(t)
	for _, layout := range layouts {
		r, err := Render(layoutInventory(t, layout), b)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		for _, nf := range r.Nodes {
			// kubeadm checks the discovery kubeconfig exists.
			discovery := filepath.Join(dir, nf.Node.Name+"-discovery.conf")
			for _, f := range nf.Files {
				if f.Path == kubeadm.DiscoveryPath {
					if err := os.WriteFile(discovery, f.Content, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, f := range nf.Files {
				if f.Path != kubeadm.InitConfigPath && f.Path != kubeadm.JoinConfigPath {
					continue
				}
				p := filepath.Join(dir, nf.Node.Name+"-"+filepath.Base(f.Path))
				content := []byte(strings.ReplaceAll(string(f.Content), kubeadm.DiscoveryPath, discovery))
				if err := os.WriteFile(p, content, 0o600); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command(kubeadmBin, "config", "validate", "--config", p).CombinedOutput()
				if err != nil {
					t.Errorf("%s layout, %s %s: kubeadm config validate: %v\n%s", layout, nf.Node.Name, f.Path, err, out)
				}
			}
		}
	}
}

// TestKubeadmSignsEveryDeclaredAddress runs `kubeadm init phase certs all`
// from the rendered init config and our CAs, then reads the apiserver
// certificate kubeadm wrote: every address must be an IP SAN (kubeadm turns
// a malformed IP into a DNS SAN silently), every name a DNS SAN, and the
// certificate must chain to the bundle's CA.
func TestKubeadmSignsEveryDeclaredAddress(t *testing.T) {
	kubeadmBin := toolstest.Require(t, "kubeadm")
	b := testBundle(t)
	for _, layout := range layouts {
		t.Run(layout, func(t *testing.T) {
			inv := layoutInventory(t, layout)
			inv.Cluster.ExtraSANs = []string{"192.168.50.10", "api.example.org"}
			// One layout with a short declared lifetime: kubeadm must
			// issue the leaves for exactly that long.
			validity := 8760 * time.Hour
			if layout == inventory.LayoutDNS {
				inv.Cluster.Certificates.ValidityPeriod, validity = "10m", 10*time.Minute
			}
			r, err := Render(inv, b)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			certDir := filepath.Join(dir, "pki")
			var initCfg []byte
			for _, f := range r.Nodes[0].Files {
				switch {
				case f.Path == kubeadm.InitConfigPath:
					initCfg = f.Content
				case strings.HasPrefix(f.Path, pki.CertificatesDir+"/"):
					dst := filepath.Join(certDir, strings.TrimPrefix(f.Path, pki.CertificatesDir+"/"))
					if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(dst, f.Content, f.Mode); err != nil {
						t.Fatal(err)
					}
				}
			}
			// --cert-dir cannot be combined with --config.
			cfg := strings.Replace(string(initCfg), "certificatesDir: "+pki.CertificatesDir, "certificatesDir: "+certDir, 1)
			cfgPath := filepath.Join(dir, "init.yaml")
			if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(kubeadmBin, "init", "phase", "certs", "all", "--config", cfgPath).CombinedOutput(); err != nil {
				t.Fatalf("kubeadm init phase certs all: %v\n%s", err, out)
			}
			issued := time.Now()
			cert := readCert(t, filepath.Join(certDir, "apiserver.crt"))
			if left := cert.NotAfter.Sub(issued); left < validity-time.Minute || left > validity+time.Minute {
				t.Errorf("apiserver.crt is valid for %s more, declared %s", left.Round(time.Second), validity)
			}
			roots := x509.NewCertPool()
			roots.AddCert(readCert(t, filepath.Join(certDir, "ca.crt")))
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots}); err != nil {
				t.Errorf("apiserver.crt does not chain to the bundle's CA: %v", err)
			}
			ips := map[string]bool{}
			for _, ip := range cert.IPAddresses {
				ips[ip.String()] = true
			}
			wantIPs := []string{inv.Cluster.Endpoint.VIP, "192.168.50.10", "127.0.0.1", "10.96.0.1"}
			wantNames := []string{"api.example.org", "localhost", "kubernetes.default.svc.cluster.local"}
			for _, n := range inv.ControlPlanes() {
				wantIPs = append(wantIPs, n.Address)
				wantNames = append(wantNames, n.Name)
			}
			if layout == inventory.LayoutDNS {
				wantNames = append(wantNames, inv.Cluster.Endpoint.DNSName)
			}
			for _, ip := range wantIPs {
				if !ips[ip] {
					t.Errorf("%s is not an IP SAN of apiserver.crt (IPs %v)", ip, cert.IPAddresses)
				}
				if slices.Contains(cert.DNSNames, ip) {
					t.Errorf("%s became a DNS SAN", ip)
				}
			}
			for _, n := range wantNames {
				if !slices.Contains(cert.DNSNames, n) {
					t.Errorf("%s is not a DNS SAN of apiserver.crt (%v)", n, cert.DNSNames)
				}
			}
			for _, d := range cert.DNSNames {
				if net.ParseIP(d) != nil {
					t.Errorf("DNS SAN %s is an address", d)
				}
			}
			// Only the declared SANs: no worker address slipped in.
			for _, w := range inv.Workers() {
				if ips[w.Address] {
					t.Errorf("worker %s's address is a SAN", w.Name)
				}
			}
		})
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: not PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestKeepalivedAcceptsEveryConfig(t *testing.T) {
	keepalivedBin := toolstest.Require(t, "keepalived")
	if os.Geteuid() != 0 {
		toolstest.Missing(t, "keepalived -t checks script security as root; run as root")
	}
	b := testBundle(t)
	for _, ms := range []int{1000, 500} {
		inv := layoutInventory(t, inventory.LayoutVIP)
		inv.Cluster.VRRP.AdvertIntervalMs = ms
		r, err := Render(inv, b)
		if err != nil {
			t.Fatal(err)
		}
		// keepalived refuses scripts under world-writable directories
		// such as /tmp, so the check script lives under the cache dir.
		if err := os.MkdirAll(tools.CacheDir(), 0o755); err != nil {
			t.Fatal(err)
		}
		dir, err := os.MkdirTemp(tools.CacheDir(), "keepalived-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, nf := range r.Nodes {
			var conf, script []byte
			for _, f := range nf.Files {
				switch filepath.Base(f.Path) {
				case "keepalived.conf":
					conf = f.Content
				case "check_apiserver.sh":
					script = f.Content
				}
			}
			if !nf.Node.IsControlPlane() {
				if conf != nil {
					t.Errorf("worker %s got keepalived.conf", nf.Node.Name)
				}
				continue
			}
			scriptPath := filepath.Join(dir, nf.Node.Name+"-check.sh")
			confPath := filepath.Join(dir, nf.Node.Name+".conf")
			os.WriteFile(scriptPath, script, 0o755)
			os.WriteFile(confPath, []byte(strings.ReplaceAll(string(conf), "/etc/keepalived/check_apiserver.sh", scriptPath)), 0o600)
			out, err := exec.Command(keepalivedBin, "-t", "-l", "-f", confPath).CombinedOutput()
			if err != nil || len(strings.TrimSpace(string(out))) > 0 {
				t.Errorf("advert %d ms, %s: keepalived -t: %v\n%s\n%s", ms, nf.Node.Name, err, out, conf)
			}
			// One peer per line: `unicast_peer { a b }` split the brain.
			for _, peer := range inv.ControlPlanes() {
				if peer.Name != nf.Node.Name && !strings.Contains(string(conf), "\n        "+peer.Address+"\n") {
					t.Errorf("%s: peer %s not on a line of its own", nf.Node.Name, peer.Address)
				}
			}
		}
	}
}

// kubeadm's file discovery loads and validates the kubeconfig with
// client-go's clientcmd before anything else (kubeadm
// app/discovery/file): the same checks here.
func TestDiscoveryConfigIsAValidKubeconfig(t *testing.T) {
	b := testBundle(t)
	for _, layout := range layouts {
		inv := layoutInventory(t, layout)
		r, err := Render(inv, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, nf := range r.Nodes {
			for _, f := range nf.Files {
				if f.Path != kubeadm.DiscoveryPath {
					continue
				}
				cfg, err := clientcmd.Load(f.Content)
				if err != nil {
					t.Fatalf("%s %s: %v", layout, nf.Node.Name, err)
				}
				if err := clientcmd.Validate(*cfg); err != nil {
					t.Errorf("%s %s: kubeadm would refuse it: %v", layout, nf.Node.Name, err)
				}
				cl := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
				if cl.Server != "https://"+inv.Endpoint() || !bytes.Equal(cl.CertificateAuthorityData, b.Talos.Certs.K8s.Crt) {
					t.Errorf("%s %s: discovers %s with another CA, want the endpoint %s", layout, nf.Node.Name, cl.Server, inv.Endpoint())
				}
				if u := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]; u == nil || len(u.ClientKeyData) > 0 || u.Token != "" {
					t.Errorf("%s %s: the discovery kubeconfig carries credentials", layout, nf.Node.Name)
				}
			}
		}
	}
}

// The real kubelet of every Kubernetes version the cluster runs or is
// upgraded to must accept the flags we have kubeadm give it
// (nodeRegistration.kubeletExtraArgs, which kubeadm writes into
// kubeadm-flags.env): a flag a version removed ends that kubelet at once,
// and every node with it stays NotReady after the upgrade (v1.35 refuses
// --pod-infra-container-image, which v1.34 only called deprecated).
func TestKubeletAcceptsEveryNodesFlags(t *testing.T) {
	kubelets := map[string]string{
		tools.KubernetesVersion:        toolstest.Require(t, "kubelet"),
		tools.UpgradeKubernetesVersion: toolstest.RequireKube(t, "kubelet", tools.UpgradeKubernetesVersion),
	}
	b := testBundle(t)
	for _, layout := range layouts {
		r, err := Render(layoutInventory(t, layout), b)
		if err != nil {
			t.Fatal(err)
		}
		for _, nf := range r.Nodes {
			for _, f := range nf.Files {
				if f.Path != kubeadm.InitConfigPath && f.Path != kubeadm.JoinConfigPath {
					continue
				}
				args := kubeletExtraArgs(t, f.Content)
				if len(args) == 0 {
					t.Fatalf("%s %s: no kubeletExtraArgs (node-ip is always there)", nf.Node.Name, f.Path)
				}
				for v, kubelet := range kubelets {
					out, err := exec.Command(kubelet, append(args, "--version")...).CombinedOutput()
					if err != nil {
						t.Errorf("%s layout, %s: the %s kubelet refuses %q: %v\n%s", layout, nf.Node.Name, v, args, err, out)
					}
				}
			}
		}
	}
}

// kubeletExtraArgs reads the kubelet flags of the Init- or
// JoinConfiguration in a rendered kubeadm file, as kubeadm writes them.
func kubeletExtraArgs(t *testing.T, content []byte) []string {
	t.Helper()
	var out []string
	for _, doc := range strings.Split(string(content), "\n---\n") {
		var d struct {
			Kind             string `json:"kind"`
			NodeRegistration struct {
				KubeletExtraArgs []kubeadm.Arg `json:"kubeletExtraArgs"`
			} `json:"nodeRegistration"`
		}
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind != "InitConfiguration" && d.Kind != "JoinConfiguration" {
			continue
		}
		for _, a := range d.NodeRegistration.KubeletExtraArgs {
			out = append(out, "--"+a.Name+"="+a.Value)
		}
	}
	return out
}

// kube-proxy reads the KubeProxyConfiguration we render as we mean it:
// the real kube-proxy, run on it in a network namespace of its own (it
// stops at the missing API before it touches anything), passes validation
// with conntrack.maxPerCore 0 (nodes in containers) and unset, decodes it
// strictly (a misspelt field would fall back to lenient decoding), and
// refuses -1.
func TestKubeProxyReadsItsConfig(t *testing.T) {
	kubeProxy := toolstest.Require(t, "kube-proxy")
	if os.Geteuid() != 0 {
		toolstest.Missing(t, "a network namespace of its own needs root")
	}
	zero, negative := int32(0), int32(-1)
	for _, n := range []*int32{nil, &zero, &negative} {
		name := "unset"
		if n != nil {
			name = fmt.Sprint(*n)
		}
		inv := layoutInventory(t, inventory.LayoutVIP)
		inv.Cluster.KubeProxy.Replacement = inventory.ReplacementNone
		inv.Cluster.KubeProxy.ConntrackMaxPerCore = n
		data, err := yaml.Marshal(kubeadm.KubeProxy(inv))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "kube-proxy.yaml")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, _ := exec.CommandContext(ctx, "unshare", "--net", kubeProxy, "--config", p, "--hostname-override", "oracle").CombinedOutput()
		cancel()
		invalid := strings.Contains(string(out), "failed validate")
		if invalid != (n == &negative) || strings.Contains(string(out), "strict decoding error") || !invalid && !strings.Contains(string(out), "in-cluster configuration") {
			t.Errorf("maxPerCore %s:\n%s\n%s", name, data, out)
		}
	}
}
