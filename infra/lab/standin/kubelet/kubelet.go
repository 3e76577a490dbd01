// Package kubelet is the kubelet stand-in of the emulated homelab. A node
// there has no container runtime, so the stand-in runs the static pods that
// kubeadm writes as plain processes of the node, and otherwise does what
// kubeadm and the cluster expect of a kubelet: answer on the healthz port,
// do the TLS bootstrap, register the Node, post its status with a Ready
// condition that follows the container runtime's (Ready=False while the
// runtime's network is not ready, as the kubelet's), renew the node Lease,
// keep mirror pods of the static pods, and take the pods the API binds to
// the node through the runtime's sandboxes to the status a real node would
// give them (package pods).
package kubelet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/homelab-dev/homelab/infra/lab/standin/images"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/apiview"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/ciliumagent"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/clientcert"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/mirror"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/nodestatus"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/pods"
	"github.com/homelab-dev/homelab/infra/lab/standin/kubelet/staticpod"
)

// Version is the kubelet version the stand-in reports; kubeadm's preflight
// compares it with its own.
var Version = nodestatus.KubeletVersion

// Config is everything the stand-in needs; Main fills it from the kubelet's
// flags and config file.
type Config struct {
	NodeName string
	// NodeIP is the node's InternalIP; empty picks the first global IPv4
	// address of the node.
	NodeIP             string
	NodeLabels         map[string]string
	RegisterWithTaints []corev1.Taint

	// KubeconfigPath empty means standalone: static pods only.
	KubeconfigPath          string
	BootstrapKubeconfigPath string
	RotateCertificates      bool
	PKIDir                  string
	// ServerTLSBootstrap asks the cluster CA for the serving certificate
	// (else it is self-signed); APIAddress is the kubelet port's
	// host:port ("" disables it), ClientCAFile the CA its clients'
	// certificates must chain to.
	ServerTLSBootstrap bool
	APIAddress         string
	ClientCAFile       string

	RuntimeEndpoint string
	RootDir         string
	ManifestDir     string
	StateDir        string
	LogDir          string
	// HealthzAddress is host:port; empty disables the endpoint.
	HealthzAddress string

	StatusInterval time.Duration
	LeaseDuration  time.Duration
	MaxPods        int
	// Env is the base environment of static pod processes.
	Env []string
	// PollInterval, StopGrace and MaxBackoff tune the static pods; zero
	// means the defaults of staticpod.Supervisor.
	PollInterval time.Duration
	StopGrace    time.Duration
	MaxBackoff   time.Duration
	// CredentialRetry is the pause between attempts to get credentials.
	CredentialRetry time.Duration
	// MirrorInterval is the period of the mirror pod sync (default 2 s).
	MirrorInterval time.Duration
	// RuntimeInterval is the period of the runtime status check (5 s).
	RuntimeInterval time.Duration
	// PodStateDir remembers the API pods whose containers count as started
	// (default pods.DefaultStateDir, under /run).
	PodStateDir string
	// PodInterval is the period of the API pod sync (default 2 s).
	PodInterval time.Duration
	// Root prefixes the node paths the stand-in writes for pods (hostPath
	// volumes, the Cilium agent's files); "" is /.
	Root string
	// Images is where static pods' binaries come from (nil: their PATH,
	// for tests); on a node, the lab's image tree.
	Images *images.Store
	// FailCgroupV1 is the configuration's failCgroupV1 (nil: unset, the
	// version's default); cgroupV1 is the host's hierarchy, which Main
	// checks it against.
	FailCgroupV1 *bool
	cgroupV1     bool

	Logf func(format string, args ...any)
}

// Main runs the stand-in with the real kubelet's command line (without
// argv[0]) and returns the exit code.
func Main(args []string) int {
	f, err := parseFlags(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet: %v\n", err)
		return 1
	}
	if f.version != "" && f.version != "false" {
		printVersion(f.version)
		return 0
	}
	if f.help {
		fmt.Println("kubelet (homelab stand-in): accepts the kubelet's flags; acts on --bootstrap-kubeconfig, --kubeconfig, --config,\n" +
			"--container-runtime-endpoint, --node-ip, --node-labels, --hostname-override, --register-with-taints,\n" +
			"--root-dir, --cert-dir, --pod-manifest-path; ignores the rest.")
		return 0
	}
	cfg, err := configFromFlags(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet: %v\n", err)
		return 1
	}
	cfg.defaults()
	if cfg.cgroupV1 {
		// The kubelet validates its configuration before anything else
		// and ends with the error: on cgroup v1 from v1.35 on unless
		// failCgroupV1 is false (systemd restarts it, to fail again).
		if err := checkCgroupV1(Version, cfg.FailCgroupV1, true); err != nil {
			fmt.Fprintf(os.Stderr, "kubelet: \"command failed\" err=\"failed to validate kubelet configuration, error: %v, path: %s\"\n", err, f.config)
			return 1
		}
		cfg.Logf("warning: %s", cgroupV1Warning)
	}
	if len(f.ignored) > 0 {
		cfg.Logf("ignoring %s", strings.Join(f.ignored, " "))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := Run(ctx, cfg); err != nil {
		cfg.Logf("%v", err)
		return 1
	}
	return 0
}

func printVersion(mode string) {
	if mode == "raw" {
		b, _ := json.MarshalIndent(map[string]string{
			"major": "1", "minor": strings.Split(Version, ".")[1], "gitVersion": Version,
			"gitTreeState": "clean", "goVersion": runtime.Version(), "compiler": runtime.Compiler,
			"platform": runtime.GOOS + "/" + runtime.GOARCH,
		}, "", "  ")
		fmt.Println(string(b))
		return
	}
	fmt.Println("Kubernetes " + Version)
}

func configFromFlags(f flags) (Config, error) {
	c := Config{
		KubeconfigPath:          f.kubeconfig,
		BootstrapKubeconfigPath: f.bootstrapKubeconfig,
		NodeIP:                  f.nodeIP,
		RootDir:                 f.rootDir,
		PKIDir:                  f.certDir,
		StateDir:                f.stateDir,
		LogDir:                  f.logDir,
		ManifestDir:             f.podManifestPath,
		RuntimeEndpoint:         f.runtimeEndpoint,
		HealthzAddress:          "127.0.0.1:10248",
		Images:                  &images.Store{Dir: images.Root},
	}
	if f.config != "" {
		kc, err := loadConfigFile(f.config)
		if err != nil {
			return c, err
		}
		if c.ManifestDir == "" {
			c.ManifestDir = kc.StaticPodPath
		}
		if c.RuntimeEndpoint == "" {
			c.RuntimeEndpoint = kc.ContainerRuntimeEndpoint
		}
		host, port := "127.0.0.1", int32(10248)
		if kc.HealthzBindAddress != "" {
			host = kc.HealthzBindAddress
		}
		if kc.HealthzPort != nil {
			port = *kc.HealthzPort
		}
		c.HealthzAddress = ""
		if port > 0 {
			c.HealthzAddress = net.JoinHostPort(host, strconv.Itoa(int(port)))
		}
		c.RotateCertificates = kc.RotateCertificates
		c.ServerTLSBootstrap = kc.ServerTLSBootstrap
		c.APIAddress = kubeletAPIAddress(kc.Address, kc.Port)
		c.ClientCAFile = kc.Authentication.X509.ClientCAFile
		c.StatusInterval = kc.NodeStatusUpdateFrequency.Duration
		c.LeaseDuration = time.Duration(kc.NodeLeaseDurationSeconds) * time.Second
		c.MaxPods = int(kc.MaxPods)
		c.RegisterWithTaints = kc.RegisterWithTaints
		c.FailCgroupV1 = kc.FailCgroupV1
	}
	if f.failCgroupV1 != "" {
		// The flag wins over the file, as the kubelet's flags do.
		v, _ := strconv.ParseBool(f.failCgroupV1)
		c.FailCgroupV1 = &v
	}
	c.cgroupV1 = hostCgroupV1()
	if f.registerWithTaints != "" {
		t, err := parseTaints(f.registerWithTaints)
		if err != nil {
			return c, fmt.Errorf("--register-with-taints: %w", err)
		}
		c.RegisterWithTaints = t
	}
	labels, err := parseLabels(f.nodeLabels)
	if err != nil {
		return c, err
	}
	if err := validateNodeLabels(labels); err != nil {
		return c, err
	}
	c.NodeLabels = labels
	if f.nodeIP != "" && net.ParseIP(f.nodeIP) == nil {
		return c, fmt.Errorf("--node-ip: %q is not an IP address", f.nodeIP)
	}
	c.NodeName = strings.ToLower(strings.TrimSpace(f.hostnameOverride))
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return c, err
		}
		c.NodeName = strings.ToLower(strings.TrimSpace(h))
	}
	return c, nil
}

func (c *Config) defaults() {
	if c.Logf == nil {
		c.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "%s kubelet: %s\n", time.Now().Format("2006-01-02T15:04:05.000"), fmt.Sprintf(format, args...))
		}
	}
	if c.RootDir == "" {
		c.RootDir = "/var/lib/kubelet"
	}
	if c.PKIDir == "" {
		c.PKIDir = filepath.Join(c.RootDir, "pki")
	}
	if c.StateDir == "" {
		c.StateDir = filepath.Join(c.RootDir, "standin", "pods")
	}
	if c.LogDir == "" {
		c.LogDir = "/var/log/pods"
	}
	if c.ManifestDir == "" {
		c.ManifestDir = "/etc/kubernetes/manifests"
	}
	if c.RuntimeEndpoint == "" {
		c.RuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	}
	if c.Env == nil {
		path := os.Getenv("PATH")
		if path == "" {
			path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		}
		c.Env = []string{"PATH=" + path, "HOME=/root", "HOSTNAME=" + c.NodeName}
	}
}

// Run runs the stand-in until ctx ends. Static pod processes are left
// running: the next kubelet re-adopts them.
func Run(ctx context.Context, c Config) error {
	c.defaults()
	if c.NodeIP == "" {
		c.NodeIP = firstNodeIP()
	} else if !localIP(c.NodeIP) {
		c.Logf("warning: --node-ip %s is not an address of this node", c.NodeIP)
	}
	c.Logf("starting %s for node %s (node IP %q), static pods from %s", Version, c.NodeName, c.NodeIP, c.ManifestDir)

	// The device manager's directory, which the kubelet makes at start:
	// device plugins mount it and register on its socket.
	if err := os.MkdirAll(filepath.Join(c.RootDir, "device-plugins"), 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	// One error from each of the static pods and the API side.
	errc := make(chan error, 2)
	if c.HealthzAddress != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveHealthz(ctx, c.HealthzAddress, c.Logf)
		}()
	}
	sup := &staticpod.Supervisor{
		ManifestDir:  c.ManifestDir,
		StateDir:     c.StateDir,
		LogDir:       c.LogDir,
		Env:          c.Env,
		PollInterval: c.PollInterval,
		StopGrace:    c.StopGrace,
		MaxBackoff:   c.MaxBackoff,
		Images:       c.Images,
		Logf:         c.Logf,
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		unlock, err := lockState(ctx, filepath.Join(filepath.Dir(c.StateDir), "kubelet.lock"), c.Logf)
		if err != nil {
			if ctx.Err() == nil {
				errc <- err
			}
			return
		}
		defer unlock()
		if err := sup.Run(ctx); err != nil {
			errc <- fmt.Errorf("static pods: %w", err)
		}
	}()
	if c.KubeconfigPath != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runAPI(ctx, c, sup); err != nil && ctx.Err() == nil {
				errc <- err
			}
		}()
	} else {
		c.Logf("no --kubeconfig: standalone mode, static pods only")
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		cancel()
	}
	wg.Wait()
	if err == nil {
		c.Logf("stopped; static pods left running")
	}
	return err
}

// runAPI does the node's part with the API until ctx ends. Its error is
// the kubelet's at start: credentials it cannot load end the process, as
// they end the kubelet's (systemd restarts it, the static pods go on).
func runAPI(ctx context.Context, c Config, sup *staticpod.Supervisor) error {
	restCfg, err := clientcert.Load(ctx, clientcert.Options{
		NodeName:                c.NodeName,
		KubeconfigPath:          c.KubeconfigPath,
		BootstrapKubeconfigPath: c.BootstrapKubeconfigPath,
		CertDir:                 c.PKIDir,
		Rotate:                  c.RotateCertificates,
		RetryInterval:           c.CredentialRetry,
		Logf:                    c.Logf,
	})
	if err != nil {
		return err
	}
	restCfg.UserAgent = fmt.Sprintf("kubelet/%s (%s/%s) homelab-standin", Version, runtime.GOOS, runtime.GOARCH)
	restCfg.Timeout = 30 * time.Second
	restCfg.QPS, restCfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		c.Logf("API client: %v", err)
		return nil
	}
	rt, err := newRuntimeClient(c.RuntimeEndpoint)
	if err != nil {
		c.Logf("runtime endpoint %s: %v", c.RuntimeEndpoint, err)
		return nil
	}
	defer rt.Close()
	if c.APIAddress != "" {
		cert, err := servingCert(ctx, c, restCfg)
		if err != nil {
			c.Logf("serving certificate: %v", err)
			return nil
		}
		go serveKubeletAPI(ctx, c.APIAddress, c.ClientCAFile, cert, c.Logf)
	}
	caPool, err := serverCAs(restCfg)
	if err != nil {
		c.Logf("API TLS: %v", err)
		return nil
	}
	// The Node and its pods, watched as the kubelet watches them.
	view := apiview.Start(ctx, client, c.NodeName)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(3)
	go func() {
		defer wg.Done()
		rt.watch(ctx, c.RuntimeInterval, c.Logf)
	}()
	go func() {
		defer wg.Done()
		mirror.Run(ctx, client, mirror.Options{
			NodeName: c.NodeName,
			NodeIP:   c.NodeIP,
			Interval: c.MirrorInterval,
			API:      view,
			Changed:  view.Changed(),
			Pods:     sup.Pods,
			Logf:     c.Logf,
		})
	}()
	go func() {
		defer wg.Done()
		pods.Run(ctx, client, pods.Options{
			NodeName:     c.NodeName,
			NodeIP:       c.NodeIP,
			Runtime:      rt.rt,
			NetworkError: func() error { return rt.State().NetworkError() },
			StateDir:     c.PodStateDir,
			Root:         c.Root,
			Interval:     c.PodInterval,
			API:          view,
			Changed:      view.Changed(),
			Images:       c.Images,
			Env:          c.Env,
			LogDir:       c.LogDir,
			Agents: []pods.Agent{&ciliumagent.Agent{
				Client:    client,
				TLS:       &tls.Config{RootCAs: caPool},
				APIServer: strings.TrimPrefix(restCfg.Host, "https://"),
				Root:      c.Root,
				Logf:      c.Logf,
			}},
			Logf: c.Logf,
		})
	}()
	nodestatus.Run(ctx, client, nodestatus.Options{
		NodeName:       c.NodeName,
		NodeIP:         c.NodeIP,
		Labels:         c.NodeLabels,
		Taints:         c.RegisterWithTaints,
		StatusInterval: c.StatusInterval,
		LeaseDuration:  c.LeaseDuration,
		RuntimeVersion: rt.Version,
		Runtime:        rt.State,
		Changed:        rt.changed,
		Machine:        nodestatus.DetectMachine(c.RootDir, c.MaxPods),
		Logf:           c.Logf,
	})
	return nil
}

// serverCAs are the CAs the kubelet trusts for the API server (the
// credentials' rotating transport carries them in its own TLS config).
func serverCAs(cfg *rest.Config) (*x509.CertPool, error) {
	if t, ok := cfg.Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
		return t.TLSClientConfig.RootCAs, nil
	}
	t, err := rest.TLSConfigFor(cfg)
	if err != nil || t == nil {
		return nil, err
	}
	return t.RootCAs, nil
}

// serveHealthz answers what kubeadm polls before anything else. The port
// may still be held by the kubelet being replaced, so binding is retried.
func serveHealthz(ctx context.Context, addr string, logf func(string, ...any)) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	var ln net.Listener
	reported := false
	for {
		var err error
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if !reported {
			logf("healthz: %v; retrying", err)
			reported = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logf("healthz: %v", err)
	}
}

// firstNodeIP picks the primary IPv4 address of the first interface that
// has one. Host routes (/32) are skipped: that is how keepalived adds a VIP,
// which must never become a node's InternalIP.
func firstNodeIP() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok || n.IP.To4() == nil || !n.IP.IsGlobalUnicast() {
				continue
			}
			if ones, bits := n.Mask.Size(); ones == bits {
				continue
			}
			return n.IP.String()
		}
	}
	return ""
}

func localIP(ip string) bool {
	want := net.ParseIP(ip)
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(want) {
			return true
		}
	}
	return false
}

// lockState waits until no other kubelet supervises the static pods: during
// a restart the old one may still be on its way out, and two supervisors
// would each start a copy of every pod.
func lockState(ctx context.Context, path string, logf func(string, ...any)) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	reported := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !reported {
			logf("waiting for the previous kubelet to release %s", path)
			reported = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
