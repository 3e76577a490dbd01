package roles

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"github.com/homelab-dev/homelab/inventory"
	"github.com/homelab-dev/homelab/roles/kubeadm"
	"github.com/homelab-dev/homelab/roles/nodefacts"
	"github.com/homelab-dev/homelab/roles/pki"
)

// The provider renews a node's certificates with these kubeadm commands;
// kubeadm itself says they do what the provider expects of them. Each
// certificate file comes from its `init phase certs` in a directory that
// holds only the CA nodefacts names for it (the provider's staging
// directory), signed by that CA, for the declared validity. Each
// kubeconfig's client certificate is renewed in place by `kubeadm certs
// renew NAME --config` with no API, for the declared validity, keeping its
// subject, its groups and its server.
func TestKubeadmRenewsEveryRenewable(t *testing.T) {
	kubeadmBin := toolstest.Require(t, "kubeadm")
	if os.Geteuid() != 0 {
		toolstest.Missing(t, "kubeadm certs renew works on /etc/kubernetes only: the test chroots it (--rootfs), which needs root")
	}
	inv := layoutInventory(t, inventory.LayoutVIP)
	render := func(validity string) ([]byte, map[string][]byte) { return renderFirstNode(t, inv, validity) }
	write := func(t *testing.T, p string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(t *testing.T, args ...string) {
		t.Helper()
		if out, err := exec.Command(kubeadmBin, args...).CombinedOutput(); err != nil {
			t.Fatalf("kubeadm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	within := func(t *testing.T, what string, notAfter time.Time, validity time.Duration) {
		t.Helper()
		if left := time.Until(notAfter); left < validity-2*time.Minute || left > validity+time.Minute {
			t.Errorf("%s is valid for %s more, declared %s", what, left.Round(time.Second), validity)
		}
	}

	initCfg, identity := render("2h")
	for _, r := range nodefacts.Renewables {
		if r.Kubeconfig() {
			continue
		}
		t.Run(r.Name(), func(t *testing.T) {
			dir := t.TempDir()
			staging := filepath.Join(dir, "staging")
			write(t, filepath.Join(staging, r.CA+".crt"), identity[r.CA+".crt"])
			write(t, filepath.Join(staging, r.CA+".key"), identity[r.CA+".key"])
			cfg := filepath.Join(dir, "config.yaml")
			write(t, cfg, []byte(strings.Replace(string(initCfg), "certificatesDir: "+pki.CertificatesDir, "certificatesDir: "+staging, 1)))
			run(t, "init", "phase", "certs", r.Phase, "--config", cfg)
			crt := filepath.Join(staging, r.Name())
			if _, err := os.Stat(strings.TrimSuffix(crt, ".crt") + ".key"); err != nil {
				t.Errorf("no key beside it: %v", err)
			}
			cert := readCert(t, crt)
			roots := x509.NewCertPool()
			roots.AddCert(readCert(t, filepath.Join(staging, r.CA+".crt")))
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
				t.Errorf("not signed by %s: %v", r.CA, err)
			}
			within(t, r.Name(), cert.NotAfter, 2*time.Hour)
			// Only that pair: regenerateCerts moves exactly it into place.
			var files []string
			_ = filepath.Walk(staging, func(p string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() {
					files = append(files, strings.TrimPrefix(p, staging+"/"))
				}
				return nil
			})
			if len(files) != 4 {
				t.Errorf("the phase wrote %v, want the CA pair and %s's pair", files, r.Name())
			}
		})
	}

	// The kubeconfigs, issued for 1h, renewed for the 2h now declared.
	root := t.TempDir()
	short, _ := render("1h")
	for name, data := range identity {
		write(t, filepath.Join(root, pki.CertificatesDir, name), data)
	}
	write(t, filepath.Join(root, "short.yaml"), short)
	write(t, filepath.Join(root, "init.yaml"), initCfg)
	for _, r := range nodefacts.Renewables {
		if !r.Kubeconfig() {
			continue
		}
		t.Run(r.Name(), func(t *testing.T) {
			phase := strings.TrimSuffix(r.Name(), ".conf")
			run(t, "init", "phase", "kubeconfig", phase, "--rootfs", root, "--config", "/short.yaml")
			path := filepath.Join(root, r.Path)
			before := kubeconfigCert(t, path)
			within(t, r.Name()+" as issued", before.NotAfter, time.Hour)
			beforeServer := kubeconfigServer(t, path)
			run(t, "certs", "renew", r.Name(), "--rootfs", root, "--config", "/init.yaml")
			after := kubeconfigCert(t, path)
			within(t, r.Name()+" renewed", after.NotAfter, 2*time.Hour)
			if bytes.Equal(after.Raw, before.Raw) || after.Subject.String() != before.Subject.String() {
				t.Errorf("renewed %s, was %s", after.Subject, before.Subject)
			}
			if s := kubeconfigServer(t, path); s != beforeServer {
				t.Errorf("server %s, was %s", s, beforeServer)
			}
		})
	}
}

func kubeconfigCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		c, err := nodefacts.ParseCertPEM(a.ClientCertificateData)
		if err != nil {
			t.Fatalf("%s: %v (%s)", path, err, base64.StdEncoding.EncodeToString(a.ClientCertificateData))
		}
		return c
	}
	t.Fatalf("%s embeds no client certificate", path)
	return nil
}

func kubeconfigServer(t *testing.T, path string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		return c.Server
	}
	return ""
}

// A revival renews what has already expired, with no API: kubeadm renews
// an expired kubeconfig's client certificate in place (`kubeadm certs
// renew` looks at neither its dates nor the cluster), and its phase
// issues a serving certificate again in the staging directory however
// long the node's own has been expired.
func TestKubeadmRenewsWhatExpired(t *testing.T) {
	kubeadmBin := toolstest.Require(t, "kubeadm")
	if os.Geteuid() != 0 {
		toolstest.Missing(t, "kubeadm certs renew works on /etc/kubernetes only: the test chroots it (--rootfs), which needs root")
	}
	inv := layoutInventory(t, inventory.LayoutVIP)
	render := func(validity string) ([]byte, map[string][]byte) { return renderFirstNode(t, inv, validity) }
	write := func(p string, data []byte) {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(kubeadmBin, args...).CombinedOutput(); err != nil {
			t.Fatalf("kubeadm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	root := t.TempDir()
	expiring, identity := render("2s")
	initCfg, _ := render("2h")
	for name, data := range identity {
		write(filepath.Join(root, pki.CertificatesDir, name), data)
	}
	write(filepath.Join(root, "expiring.yaml"), expiring)
	write(filepath.Join(root, "init.yaml"), initCfg)
	// Every kubeconfig and the apiserver's certificate, valid for 2 s.
	var kubeconfigs []nodefacts.Renewable
	for _, r := range nodefacts.Renewables {
		if r.Kubeconfig() {
			kubeconfigs = append(kubeconfigs, r)
			run("init", "phase", "kubeconfig", strings.TrimSuffix(r.Name(), ".conf"), "--rootfs", root, "--config", "/expiring.yaml")
		}
	}
	run("init", "phase", "certs", "apiserver", "--rootfs", root, "--config", "/expiring.yaml")
	apiserver := filepath.Join(root, nodefacts.PKIFile(nodefacts.APIServerCert))
	if left := time.Until(readCert(t, apiserver).NotAfter); left > 3*time.Second {
		t.Fatalf("issued for %s, declared 2s", left)
	}
	time.Sleep(3 * time.Second)
	if !time.Now().After(readCert(t, apiserver).NotAfter) {
		t.Fatal("not expired yet")
	}
	for _, r := range kubeconfigs {
		path := filepath.Join(root, r.Path)
		before := kubeconfigCert(t, path)
		if time.Now().Before(before.NotAfter) {
			t.Fatalf("%s has not expired", r.Name())
		}
		run("certs", "renew", r.Name(), "--rootfs", root, "--config", "/init.yaml")
		after := kubeconfigCert(t, path)
		if left := time.Until(after.NotAfter); left < 2*time.Hour-2*time.Minute || after.Subject.String() != before.Subject.String() {
			t.Errorf("%s renewed for %s more as %s, was %s", r.Name(), left.Round(time.Second), after.Subject, before.Subject)
		}
	}
	// The staging directory regenerateCerts uses: only the CA, and the
	// current config.
	staging := filepath.Join(root, "staging")
	write(filepath.Join(staging, "ca.crt"), identity["ca.crt"])
	write(filepath.Join(staging, "ca.key"), identity["ca.key"])
	write(filepath.Join(root, "staging.yaml"), []byte(strings.Replace(string(initCfg), "certificatesDir: "+pki.CertificatesDir, "certificatesDir: "+staging, 1)))
	run("init", "phase", "certs", "apiserver", "--config", filepath.Join(root, "staging.yaml"))
	if left := time.Until(readCert(t, filepath.Join(staging, nodefacts.APIServerCert)).NotAfter); left < 2*time.Hour-2*time.Minute {
		t.Errorf("the apiserver's certificate issued again for %s", left.Round(time.Second))
	}
}

// renderFirstNode renders the inventory with that validity and returns the
// first node's kubeadm init config and its CA files, by path under the
// certificates directory.
func renderFirstNode(t *testing.T, inv *inventory.Inventory, validity string) (initCfg []byte, identity map[string][]byte) {
	t.Helper()
	inv.Cluster.Certificates.ValidityPeriod = validity
	r, err := Render(inv, testBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	identity = map[string][]byte{}
	for _, f := range r.Nodes[0].Files {
		switch {
		case f.Path == kubeadm.InitConfigPath:
			initCfg = f.Content
		case strings.HasPrefix(f.Path, pki.CertificatesDir+"/"):
			identity[strings.TrimPrefix(f.Path, pki.CertificatesDir+"/")] = f.Content
		}
	}
	return initCfg, identity
}
