package kubelet

import (
	"fmt"
	"strconv"
	"strings"
)

// flags are the kubelet command-line flags the stand-in acts on. All other
// kubelet flags are accepted and ignored.
type flags struct {
	version             string // "" when --version was not given
	help                bool
	bootstrapKubeconfig string
	kubeconfig          string
	config              string
	runtimeEndpoint     string
	nodeIP              string
	nodeLabels          []string // repeated flags merge, as with the kubelet
	hostnameOverride    string
	rootDir             string
	certDir             string
	podManifestPath     string
	registerWithTaints  string
	// failCgroupV1 is --fail-cgroupv1 ("" when not given).
	failCgroupV1 string
	// stateDir and logDir are the stand-in's own, for tests.
	stateDir string
	logDir   string
	ignored  []string
}

// boolFlags never take the next argument as their value.
var boolFlags = map[string]bool{
	"version": true, "help": true, "h": true,
	"alsologtostderr": true, "logtostderr": true, "add-dir-header": true, "skip-headers": true,
	"skip-log-headers": true, "one-output": true,
	"fail-swap-on": true, "register-node": true, "register-schedulable": true,
	"rotate-certificates": true, "rotate-server-certificates": true,
	"enable-server": true, "enable-debugging-handlers": true, "exit-on-lock-contention": true,
	"kernel-memcg-notification": true, "make-iptables-util-chains": true,
	"protect-kernel-defaults": true, "serialize-image-pulls": true, "cgroups-per-qos": true,
	"enable-controller-attach-detach": true, "keep-terminated-pod-volumes": true,
	"seccomp-default": true, "allow-privileged": true, "anonymous-auth": true,
	"local-storage-capacity-isolation": true,
}

func parseFlags(args []string) (flags, error) {
	var f flags
	values := map[string]*string{
		"bootstrap-kubeconfig":       &f.bootstrapKubeconfig,
		"kubeconfig":                 &f.kubeconfig,
		"config":                     &f.config,
		"container-runtime-endpoint": &f.runtimeEndpoint,
		"node-ip":                    &f.nodeIP,
		"hostname-override":          &f.hostnameOverride,
		"root-dir":                   &f.rootDir,
		"cert-dir":                   &f.certDir,
		"pod-manifest-path":          &f.podManifestPath,
		"register-with-taints":       &f.registerWithTaints,
		"standin-state-dir":          &f.stateDir,
		"standin-log-dir":            &f.logDir,
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			f.ignored = append(f.ignored, args[i:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			f.ignored = append(f.ignored, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		next := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("flag needs an argument: %s", a)
			}
			i++
			return args[i], nil
		}
		switch {
		case name == "version":
			f.version = "true"
			if hasVal {
				f.version = val
			}
		case name == "fail-cgroupv1":
			f.failCgroupV1 = "true"
			if hasVal {
				if _, err := strconv.ParseBool(val); err != nil {
					return f, fmt.Errorf("invalid argument %q for %q flag: %v", val, a, err)
				}
				f.failCgroupV1 = val
			}
		case name == "help" || name == "h":
			f.help = !hasVal || val == "true"
		case name == "node-labels":
			v, err := next()
			if err != nil {
				return f, err
			}
			f.nodeLabels = append(f.nodeLabels, v)
		case values[name] != nil:
			v, err := next()
			if err != nil {
				return f, err
			}
			*values[name] = v
		default:
			// An unknown flag's value is the next argument unless that looks
			// like a flag itself: the kubelet takes no positional arguments.
			if !hasVal && !boolFlags[name] && i+1 < len(args) && isValue(args[i+1]) {
				i++
				a += " " + args[i]
			}
			f.ignored = append(f.ignored, a)
		}
	}
	return f, nil
}

func isValue(s string) bool {
	if !strings.HasPrefix(s, "-") || s == "-" {
		return true
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// parseLabels reads --node-labels values: comma-separated key=value pairs.
func parseLabels(values []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range values {
		for _, kv := range strings.Split(v, ",") {
			kv = strings.TrimSpace(kv)
			if kv == "" {
				continue
			}
			k, val, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("--node-labels: %q is not key=value", kv)
			}
			out[strings.TrimSpace(k)] = strings.TrimSpace(val)
		}
	}
	return out, nil
}
