package kubelet_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"github.com/homelab-dev/homelab/infra/tools/toolstest"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"sigs.k8s.io/yaml"

	"github.com/homelab-dev/homelab/infra/envvars"
	"github.com/homelab-dev/homelab/infra/lab/standin/cri"
	"github.com/homelab-dev/homelab/infra/lab/standin/images"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/staticpod"
)

const (
	netnsEnv = envvars.KubeletITestNetns
	// nodeIP is put on the loopback device of the test's private network
	// namespace.
	nodeIP = "10.11.12.13"
	token  = "abcdef.0123456789abcdef"
)

func toolDir(name string) string {
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "homelab", "tools", name)
}

// TestIntegration runs etcd, kube-apiserver and kube-controller-manager as
// static pods of the kubelet stand-in and checks what kubeadm relies on: TLS
// bootstrap, a Ready Node with the right InternalIP, a renewed Lease,
// re-adoption of the control plane across a kubelet restart, and client
// certificate rotation from a kubeadm-init style kubeconfig.
//
// It re-executes itself in new network and PID namespaces, so nothing it
// starts can reach beyond loopback or outlive it.
func TestIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; skipped with -short")
	}
	kubeDir, etcdDir := toolDir("kubernetes-v1.34.4"), toolDir("etcd-v3.6.5")
	for _, b := range []string{filepath.Join(kubeDir, "kube-apiserver"), filepath.Join(kubeDir, "kube-controller-manager"), filepath.Join(kubeDir, "kube-scheduler"), filepath.Join(etcdDir, "etcd")} {
		if _, err := os.Stat(b); err != nil {
			toolstest.Missing(t, b+" missing: build it with infra/tools/build-kube.sh and infra/tools/build-etcd.sh")
		}
	}
	if os.Getenv(netnsEnv) == "" {
		if os.Geteuid() != 0 {
			toolstest.Missing(t, "needs root for private network and PID namespaces")
		}
		script := fmt.Sprintf(`ip link set lo up && ip addr add %s/32 dev lo && exec "$0" "$@"`, nodeIP)
		cmd := exec.Command("unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--",
			"sh", "-c", script, os.Args[0], "-test.run=^TestIntegration$", "-test.v", "-test.count=1", "-test.timeout=5m")
		cmd.Env = append(os.Environ(), netnsEnv+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in private namespaces:\n%s", out)
		if err != nil {
			t.Fatalf("integration run: %v", err)
		}
		return
	}
	runIntegration(t, kubeDir, etcdDir)
}

type env struct {
	t        *testing.T
	dir      string
	pki      string
	caCert   *x509.Certificate
	caKey    crypto.Signer
	admin    kubernetes.Interface
	apiURL   string
	criSock  string
	images   *images.Store
	pathEnv  string
	stopPods func()
}

func runIntegration(t *testing.T, kubeDir, etcdDir string) {
	e := &env{t: t, dir: t.TempDir(), apiURL: "https://127.0.0.1:6443"}
	e.pki = filepath.Join(e.dir, "pki")
	e.pathEnv = "PATH=" + kubeDir + ":" + etcdDir + ":/usr/bin:/bin"
	e.makePKI()
	e.makeImages(kubeDir, etcdDir)
	e.startCRI()

	nodeA := e.nodeDirs("a")
	e.writeControlPlane(nodeA.manifests)
	e.writeKubeconfig(nodeA.bootstrap, &clientcmdapi.AuthInfo{Token: token})
	t.Cleanup(func() {
		// The control plane outlives the kubelet by design; end it here.
		recs, _ := staticpod.LoadRecords(nodeA.state)
		for _, r := range recs {
			r.Stop(3 * time.Second)
		}
	})

	start := time.Now()
	stopA := e.runKubelet(kubelet.Config{
		NodeName:                "itest-a",
		NodeIP:                  nodeIP,
		NodeLabels:              map[string]string{"homelab.dev/pool": "cp"},
		KubeconfigPath:          nodeA.kubeconfig,
		BootstrapKubeconfigPath: nodeA.bootstrap,
		RotateCertificates:      true,
		HealthzAddress:          "127.0.0.1:10248",
	}, nodeA)
	waitFor(t, "kubelet healthz", 5*time.Second, func() error {
		r, err := http.Get("http://127.0.0.1:10248/healthz")
		if err != nil {
			return err
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			return fmt.Errorf("status %d", r.StatusCode)
		}
		return nil
	})
	t.Logf("healthz answered %s after start", time.Since(start).Round(time.Millisecond))

	e.admin = e.client(e.writeAdminKubeconfig())
	waitFor(t, "kube-apiserver from static pod", 90*time.Second, func() error {
		_, err := e.admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err
	})
	t.Logf("API ready %s after kubelet start", time.Since(start).Round(time.Millisecond))
	e.kubeadmBootstrapObjects()
	tokenAt := time.Now()

	// TLS bootstrap.
	waitFor(t, "kubelet.conf from TLS bootstrap", 60*time.Second, func() error {
		_, err := os.Stat(nodeA.kubeconfig)
		return err
	})
	t.Logf("TLS bootstrap done %s after the token existed", time.Since(tokenAt).Round(time.Millisecond))
	kc, err := clientcmd.LoadFromFile(nodeA.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	current := filepath.Join(nodeA.pkiDir, "kubelet-client-current.pem")
	auth := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	if auth.ClientCertificate != current || auth.ClientKey != current {
		t.Errorf("kubelet.conf user %+v, want both paths %s", auth, current)
	}
	if target, err := os.Readlink(current); err != nil || !strings.HasPrefix(filepath.Base(target), "kubelet-client-") {
		t.Errorf("current link -> %q: %v", target, err)
	}
	if cert := readCert(t, current); cert.Subject.CommonName != "system:node:itest-a" || cert.Subject.Organization[0] != "system:nodes" {
		t.Errorf("client cert subject %v", cert.Subject)
	}

	// No CNI configuration yet: NotReady in the kubelet's words, until the
	// Cilium agent's pod (a DaemonSet's) starts and writes one.
	e.waitNodeCondition("itest-a", corev1.ConditionFalse, "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized")
	t.Logf("Node NotReady for want of a pod network %s after the token existed", time.Since(tokenAt).Round(time.Millisecond))
	e.checkPodsAndNetwork(nodeA)
	e.checkJobs()
	nodeReady := e.waitNodeReady("itest-a")
	t.Logf("Node Ready %s after the token existed", time.Since(tokenAt).Round(time.Millisecond))
	if nodeReady.Labels["homelab.dev/pool"] != "cp" || nodeReady.Labels["kubernetes.io/hostname"] != "itest-a" {
		t.Errorf("labels %v", nodeReady.Labels)
	}
	if v := nodeReady.Status.NodeInfo.ContainerRuntimeVersion; v != "homelab-cri-standin://1.7.28" {
		t.Errorf("runtime version %q", v)
	}
	lease := e.waitLeaseRenewed("itest-a", nodeReady.UID)
	mirrors := e.waitMirrorPods("itest-a", nodeA.state, nodeReady.UID)
	t.Logf("mirror pods Running %s after the token existed", time.Since(tokenAt).Round(time.Millisecond))
	etcdPod := mirrors["etcd"]
	if etcdPod.Annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"] != "http://127.0.0.1:2379" {
		t.Errorf("etcd mirror pod annotations %v", etcdPod.Annotations)
	}
	// kubeadm finds the etcd endpoints this way.
	l, err := e.admin.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "component=etcd,tier=control-plane"})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("etcd pods by label: %v %v", l, err)
	}

	// kubeadm restarts the kubelet: the control plane must stay up and be
	// re-adopted, not started twice.
	before := pids(t, nodeA.state)
	stopA()
	for name, pid := range before {
		if !processAlive(pid) {
			t.Fatalf("static pod %s (pid %d) died with the kubelet", name, pid)
		}
	}
	stopA = e.runKubelet(kubelet.Config{
		NodeName:                "itest-a",
		NodeIP:                  nodeIP,
		KubeconfigPath:          nodeA.kubeconfig,
		BootstrapKubeconfigPath: nodeA.bootstrap,
		RotateCertificates:      true,
		HealthzAddress:          "127.0.0.1:10248",
	}, nodeA)
	defer stopA()
	time.Sleep(3 * time.Second)
	if after := pids(t, nodeA.state); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("static pods after restart %v, before %v", after, before)
	}
	e.waitLeaseRenewedAfter("itest-a", lease.Spec.RenewTime.Time)
	if again := e.waitMirrorPods("itest-a", nodeA.state, nodeReady.UID); again["etcd"].UID != etcdPod.UID {
		t.Error("mirror pod replaced by the restarted kubelet")
	}

	// What kubeadm upgrade does: rewrite a manifest and wait for the mirror
	// pod's config.hash to change.
	oldHash := mirrors["kube-controller-manager"].Annotations["kubernetes.io/config.hash"]
	e.writeControlPlane(nodeA.manifests, "--v=1")
	waitFor(t, "new config.hash on the kube-controller-manager mirror pod", 30*time.Second, func() error {
		p, err := e.admin.CoreV1().Pods("kube-system").Get(context.Background(), "kube-controller-manager-itest-a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := p.Annotations["kubernetes.io/config.hash"]; h == oldHash {
			return fmt.Errorf("hash unchanged")
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	waitFor(t, "kube-apiserver back after the manifest change", 60*time.Second, func() error {
		_, err := e.admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err
	})

	// A deleted Node comes back.
	if err := e.admin.CoreV1().Nodes().Delete(context.Background(), "itest-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again := e.waitNodeReady("itest-a")
	if again.UID == nodeReady.UID {
		t.Error("node was not re-created")
	}
	e.waitLeaseRenewed("itest-a", again.UID)
	e.waitMirrorPods("itest-a", nodeA.state, again.UID)

	// kubeadm init style: kubelet.conf with an embedded node certificate.
	// With rotation on, the kubelet stores it as kubelet-client-current.pem
	// at once (kubeadm's kubelet-finalize looks for it) and replaces it with
	// one signed through a CSR.
	nodeB := e.nodeDirs("b")
	certPEM, keyPEM := e.issue(pkix.Name{CommonName: "system:node:itest-b", Organization: []string{"system:nodes"}}, x509.ExtKeyUsageClientAuth, nil)
	e.writeKubeconfig(nodeB.kubeconfig, &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM})
	embedded := parseCert(t, certPEM)
	stopB := e.runKubelet(kubelet.Config{
		NodeName:           "itest-b",
		NodeIP:             nodeIP,
		KubeconfigPath:     nodeB.kubeconfig,
		RotateCertificates: true,
	}, nodeB)
	defer stopB()
	e.waitNodeReady("itest-b")
	currentB := filepath.Join(nodeB.pkiDir, "kubelet-client-current.pem")
	waitFor(t, "rotated client certificate of itest-b", 30*time.Second, func() error {
		if _, err := os.Stat(currentB); err != nil {
			return err
		}
		c := readCert(t, currentB)
		if c.SerialNumber.Cmp(embedded.SerialNumber) == 0 {
			return fmt.Errorf("still the kubeadm-issued certificate")
		}
		if c.Subject.CommonName != "system:node:itest-b" {
			return fmt.Errorf("subject %v", c.Subject)
		}
		return nil
	})
}

type nodeDirs struct {
	root, manifests, state, logs, pkiDir, kubeconfig, bootstrap string
}

func (e *env) nodeDirs(name string) nodeDirs {
	root := filepath.Join(e.dir, "node-"+name)
	d := nodeDirs{
		root:       root,
		manifests:  filepath.Join(root, "etc/kubernetes/manifests"),
		state:      filepath.Join(root, "var/lib/kubelet/standin/pods"),
		logs:       filepath.Join(root, "var/log/pods"),
		pkiDir:     filepath.Join(root, "var/lib/kubelet/pki"),
		kubeconfig: filepath.Join(root, "etc/kubernetes/kubelet.conf"),
		bootstrap:  filepath.Join(root, "etc/kubernetes/bootstrap-kubelet.conf"),
	}
	if err := os.MkdirAll(d.manifests, 0o755); err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e *env) runKubelet(c kubelet.Config, d nodeDirs) (stop func()) {
	c.Root = d.root
	c.PodStateDir = filepath.Join(d.root, "run/homelab-kubelet/pods")
	c.PodInterval = 500 * time.Millisecond
	c.RuntimeInterval = time.Second
	c.RootDir = filepath.Join(d.root, "var/lib/kubelet")
	c.ManifestDir, c.StateDir, c.LogDir, c.PKIDir = d.manifests, d.state, d.logs, d.pkiDir
	c.RuntimeEndpoint = "unix://" + e.criSock
	c.StatusInterval = 2 * time.Second
	c.LeaseDuration = 8 * time.Second
	c.CredentialRetry = 500 * time.Millisecond
	c.Env = []string{e.pathEnv}
	c.Images = e.images
	name := c.NodeName
	c.Logf = func(format string, args ...any) { e.t.Logf("kubelet %s: %s", name, fmt.Sprintf(format, args...)) }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := kubelet.Run(ctx, c); err != nil {
			e.t.Errorf("kubelet %s: %v", name, err)
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// startCRI serves the runtime stand-in for node a's tree: its CNI
// directories are node a's (node b shares the runtime).
func (e *env) startCRI() {
	e.criSock = filepath.Join(e.dir, "containerd.sock")
	root := filepath.Join(e.dir, "node-a")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = cri.Serve(ctx, cri.Config{Address: e.criSock, PodStateDir: filepath.Join(e.dir, "none"), ConfigPath: filepath.Join(e.dir, "no-config.toml"),
			CNIConfDir: filepath.Join(root, "etc/cni/net.d"), CNIBinDirs: []string{filepath.Join(root, "opt/cni/bin")},
			SandboxDir: filepath.Join(e.dir, "sandboxes"), Logf: e.t.Logf})
	}()
	e.t.Cleanup(func() { cancel(); <-done })
}

func (e *env) waitNodeReady(name string) *corev1.Node {
	var node *corev1.Node
	waitFor(e.t, "Node "+name+" Ready", 60*time.Second, func() error {
		n, err := e.admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && c.Reason == "KubeletReady" {
				ready = true
			}
		}
		if !ready {
			return fmt.Errorf("not Ready: %+v", n.Status.Conditions)
		}
		var ip string
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		if ip != nodeIP {
			return fmt.Errorf("InternalIP %q", ip)
		}
		if n.Status.NodeInfo.KubeletVersion != kubelet.Version {
			return fmt.Errorf("kubeletVersion %q", n.Status.NodeInfo.KubeletVersion)
		}
		node = n
		return nil
	})
	return node
}

func (e *env) waitLeaseRenewed(name string, owner types.UID) *coordinationv1.Lease {
	var first *coordinationv1.Lease
	waitFor(e.t, "Lease of "+name+" renewed", 30*time.Second, func() error {
		l, err := e.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != name || l.Spec.LeaseDurationSeconds == nil || l.Spec.RenewTime == nil {
			return fmt.Errorf("lease spec %+v", l.Spec)
		}
		if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || string(l.OwnerReferences[0].UID) != string(owner) {
			return fmt.Errorf("owners %+v", l.OwnerReferences)
		}
		if first == nil {
			first = l
			return fmt.Errorf("waiting for a renewal")
		}
		if !l.Spec.RenewTime.After(first.Spec.RenewTime.Time) {
			return fmt.Errorf("not renewed since %s", first.Spec.RenewTime)
		}
		first = l
		return nil
	})
	return first
}

// waitMirrorPods waits for a Running, Ready mirror pod per static pod,
// owned by the node and carrying the manifest's hash.
func (e *env) waitMirrorPods(node, stateDir string, nodeUID types.UID) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	// A bound, not a speed goal: in a loaded go test ./... (a lab test
	// beside it on two cores) 30 s was once too short.
	waitFor(e.t, "mirror pods of "+node, 90*time.Second, func() error {
		recs, err := staticpod.LoadRecords(stateDir)
		if err != nil || len(recs) == 0 {
			return fmt.Errorf("records: %v", err)
		}
		for _, r := range recs {
			p, err := e.admin.CoreV1().Pods("kube-system").Get(context.Background(), r.Name+"-"+node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Annotations["kubernetes.io/config.hash"] != r.Hash || p.Annotations[corev1.MirrorPodAnnotationKey] != r.Hash {
				return fmt.Errorf("%s: hash annotations %v, want %s", p.Name, p.Annotations, r.Hash)
			}
			if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != nodeUID {
				return fmt.Errorf("%s: owners %v", p.Name, p.OwnerReferences)
			}
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
			if p.Status.Phase != corev1.PodRunning || !ready || p.Status.PodIP != nodeIP {
				return fmt.Errorf("%s: status %+v", p.Name, p.Status)
			}
			out[r.Name] = p
		}
		return nil
	})
	return out
}

func (e *env) waitLeaseRenewedAfter(name string, after time.Time) {
	waitFor(e.t, "Lease of "+name+" renewed by the restarted kubelet", 30*time.Second, func() error {
		l, err := e.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !l.Spec.RenewTime.After(after) {
			return fmt.Errorf("renewed %s", l.Spec.RenewTime)
		}
		return nil
	})
}

// kubeadmBootstrapObjects creates what kubeadm init's bootstrap-token phase
// creates for joining nodes.
func (e *env) kubeadmBootstrapObjects() {
	ctx := context.Background()
	id, secret, _ := strings.Cut(token, ".")
	group := "system:bootstrappers:kubeadm:default-node-token"
	_, err := e.admin.CoreV1().Secrets("kube-system").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: "kube-system"},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"token-id": id, "token-secret": secret,
			"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
			"auth-extra-groups": group,
			"expiration":        time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for name, b := range map[string]struct{ role, kind, subject string }{
		"kubeadm:kubelet-bootstrap":                     {"system:node-bootstrapper", rbacv1.GroupKind, group},
		"kubeadm:node-autoapprove-bootstrap":            {"system:certificates.k8s.io:certificatesigningrequests:nodeclient", rbacv1.GroupKind, group},
		"kubeadm:node-autoapprove-certificate-rotation": {"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", rbacv1.GroupKind, "system:nodes"},
	} {
		_, err := e.admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: b.kind, Name: b.subject}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			e.t.Fatal(err)
		}
	}
}

func (e *env) writeControlPlane(dir string, extraArgs ...string) {
	etcdData := filepath.Join(e.dir, "etcd")
	p := func(f string) string { return filepath.Join(e.pki, f) }
	admin := filepath.Join(e.dir, "admin.conf")
	pods := map[string][]string{
		"etcd": {"etcd", "--name=itest", "--data-dir=" + etcdData,
			"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
			"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
			"--initial-cluster=itest=http://127.0.0.1:2380", "--listen-metrics-urls=http://127.0.0.1:2381"},
		"kube-apiserver": {"kube-apiserver", "--etcd-servers=http://127.0.0.1:2379",
			"--bind-address=127.0.0.1", "--secure-port=6443", "--advertise-address=" + nodeIP,
			"--service-cluster-ip-range=10.96.0.0/12", "--allow-privileged=true",
			"--tls-cert-file=" + p("apiserver.crt"), "--tls-private-key-file=" + p("apiserver.key"),
			"--client-ca-file=" + p("ca.crt"),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + p("sa.pub"), "--service-account-signing-key-file=" + p("sa.key"),
			"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
			"--enable-bootstrap-token-auth=true"},
		"kube-scheduler": {"kube-scheduler", "--kubeconfig=" + admin, "--authentication-kubeconfig=" + admin,
			"--authorization-kubeconfig=" + admin, "--bind-address=127.0.0.1", "--leader-elect=false"},
		"kube-controller-manager": {"kube-controller-manager", "--kubeconfig=" + admin,
			"--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/16",
			"--authentication-kubeconfig=" + admin, "--authorization-kubeconfig=" + admin,
			"--bind-address=127.0.0.1", "--leader-elect=false",
			"--cluster-signing-cert-file=" + p("ca.crt"), "--cluster-signing-key-file=" + p("ca.key"),
			"--controllers=*,bootstrapsigner,tokencleaner,csrapproving,csrsigning",
			"--root-ca-file=" + p("ca.crt"), "--service-account-private-key-file=" + p("sa.key")},
	}
	for name, cmd := range pods {
		cmd = append(cmd, extraArgs...)
		pod := corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system",
				Labels: map[string]string{"component": name, "tier": "control-plane"}},
			Spec: corev1.PodSpec{
				HostNetwork: true,
				Containers:  []corev1.Container{{Name: name, Image: "registry.k8s.io/" + name + ":v1.34.4", Command: cmd}},
			},
		}
		if name == "etcd" {
			pod.Annotations = map[string]string{"kubeadm.kubernetes.io/etcd.advertise-client-urls": "http://127.0.0.1:2379"}
		}
		b, err := yaml.Marshal(pod)
		if err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), b, 0o600); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) makePKI() {
	if err := os.MkdirAll(e.pki, 0o700); err != nil {
		e.t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		e.t.Fatal(err)
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "kubernetes"}, key)
	if err != nil {
		e.t.Fatal(err)
	}
	e.caCert, e.caKey = ca, key
	e.write("ca.crt", pemBlock("CERTIFICATE", ca.Raw))
	keyPEM, _ := keyutil.MarshalPrivateKeyToPEM(key)
	e.write("ca.key", keyPEM)
	c, k := e.issue(pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		&x509.Certificate{IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(nodeIP), net.ParseIP("10.96.0.1")}, DNSNames: []string{"localhost", "kubernetes"}})
	e.write("apiserver.crt", c)
	e.write("apiserver.key", k)
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		e.t.Fatal(err)
	}
	saPEM, _ := keyutil.MarshalPrivateKeyToPEM(sa)
	e.write("sa.key", saPEM)
	pub, _ := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	e.write("sa.pub", pemBlock("PUBLIC KEY", pub))
}

func (e *env) issue(subject pkix.Name, usage x509.ExtKeyUsage, sans *x509.Certificate) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		e.t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if sans != nil {
		tmpl.IPAddresses, tmpl.DNSNames = sans.IPAddresses, sans.DNSNames
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, e.caCert, &key.PublicKey, e.caKey)
	if err != nil {
		e.t.Fatal(err)
	}
	keyPEM, _ = keyutil.MarshalPrivateKeyToPEM(key)
	return pemBlock("CERTIFICATE", der), keyPEM
}

func (e *env) write(name string, data []byte) {
	if err := os.WriteFile(filepath.Join(e.pki, name), data, 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) writeKubeconfig(path string, auth *clientcmdapi.AuthInfo) {
	ca, err := os.ReadFile(filepath.Join(e.pki, "ca.crt"))
	if err != nil {
		e.t.Fatal(err)
	}
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: e.apiURL, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": auth},
		Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "x",
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(kc, path); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) writeAdminKubeconfig() string {
	c, k := e.issue(pkix.Name{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth, nil)
	p := filepath.Join(e.dir, "admin.conf")
	e.writeKubeconfig(p, &clientcmdapi.AuthInfo{ClientCertificateData: c, ClientKeyData: k})
	return p
}

func (e *env) client(kubeconfig string) kubernetes.Interface {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	return kubernetes.NewForConfigOrDie(cfg)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(path, path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func parseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func pids(t *testing.T, stateDir string) map[string]int {
	recs, err := staticpod.LoadRecords(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range recs {
		out[r.Name] = r.PID
	}
	return out
}

func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z'
}

func waitFor(t *testing.T, what string, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, timeout, err)
}
