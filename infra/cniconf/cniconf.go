// Package cniconf decides which pod network containerd takes from a node's
// CNI configuration directory, by the rules of containerd's CRI plugin
// (go-cni and libcni): the files ending in .conf, .conflist or .json,
// sorted by name; the first one is the network, and if it does not parse
// the runtime has no network at all: containerd then reports
// NetworkReady=false and the kubelet marks its Node NotReady.
//
// The emulated homelab's containerd stand-in answers its Status from here,
// and homelab doctor reads a node's directory with the same rules.
package cniconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Where containerd looks by default (its cni.conf_dir and cni.bin_dir).
const (
	ConfDir = "/etc/cni/net.d"
	BinDir  = "/opt/cni/bin"
)

// ErrNotInitialized is go-cni's error while no network is loaded; containerd
// reports every load failure as this in its Status.
var ErrNotInitialized = errors.New("cni plugin not initialized")

// What containerd's CRI Status says while the network is not ready.
const (
	NotReadyReason = "NetworkPluginNotReady"
	// NotReadyMessage is the condition's message: the load error itself
	// only goes to containerd's log (and its verbose status,
	// lastCNILoadStatus).
	NotReadyMessage = "Network plugin returns error: cni plugin not initialized"
)

// extensions are the file types libcni's ConfFiles lists for go-cni.
var extensions = []string{".conf", ".conflist", ".json"}

// Network is the configuration containerd loaded.
type Network struct {
	// File is the file's name in the directory.
	File       string
	Name       string
	CNIVersion string
	// Plugins are the plugin types, in chain order: the binaries that must
	// be in the CNI bin directory when a pod's network is set up.
	Plugins []string
}

// Entry is one directory entry.
type Entry struct {
	Name  string
	IsDir bool
}

// Candidates returns, sorted, the entries containerd would consider.
func Candidates(entries []Entry) []string {
	var out []string
	for _, e := range entries {
		if e.IsDir {
			continue
		}
		for _, ext := range extensions {
			if path.Ext(e.Name) == ext {
				out = append(out, e.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Choose returns the network containerd takes from a directory dir holding
// entries, whose files read returns: the first candidate, which must parse.
// The error says why there is none, as containerd logs it.
func Choose(dir string, entries []Entry, read func(name string) ([]byte, error)) (Network, error) {
	files := Candidates(entries)
	if len(files) == 0 {
		return Network{}, fmt.Errorf("no network config found in %s: %w", dir, ErrNotInitialized)
	}
	// containerd's max_conf_num is 1: the first file is the network, and a
	// broken first file is not skipped.
	name := files[0]
	data, err := read(name)
	if err != nil {
		return Network{}, fmt.Errorf("failed to load CNI config file %s: error reading %s: %v: %w", filepath.Join(dir, name), name, err, ErrNotInitialized)
	}
	n, err := Parse(name, data)
	if err != nil {
		return Network{}, fmt.Errorf("failed to load CNI config file %s: %v: %w", filepath.Join(dir, name), err, ErrNotInitialized)
	}
	return n, nil
}

// Parse reads one file as libcni does: a .conflist is a named list of
// plugins (at least one, each with a type), any other file a single
// plugin's configuration with a type.
func Parse(name string, data []byte) (Network, error) {
	n := Network{File: name}
	if strings.HasSuffix(name, ".conflist") {
		var raw map[string]any
		if err := json.Unmarshal(data, &raw); err != nil {
			return n, fmt.Errorf("error parsing configuration list: %v", err)
		}
		v, ok := raw["name"]
		if !ok {
			return n, fmt.Errorf("error parsing configuration list: no name")
		}
		if n.Name, ok = v.(string); !ok {
			return n, fmt.Errorf("error parsing configuration list: invalid name type %T", v)
		}
		if v, ok := raw["cniVersion"]; ok {
			if n.CNIVersion, ok = v.(string); !ok {
				return n, fmt.Errorf("error parsing configuration list: invalid cniVersion type %T", v)
			}
		}
		v, ok = raw["plugins"]
		if !ok {
			return n, fmt.Errorf("error parsing configuration list: no 'plugins' key")
		}
		plugins, ok := v.([]any)
		if !ok {
			return n, fmt.Errorf("error parsing configuration list: invalid 'plugins' type %T", v)
		}
		if len(plugins) == 0 {
			return n, fmt.Errorf("error parsing configuration list: no plugins in list")
		}
		for i, p := range plugins {
			b, _ := json.Marshal(p)
			t, err := pluginType(b)
			if err != nil {
				return n, fmt.Errorf("failed to parse plugin config %d: %v", i, err)
			}
			n.Plugins = append(n.Plugins, t)
		}
		return n, nil
	}
	t, err := pluginType(data)
	if err != nil {
		return n, err
	}
	var conf struct {
		Name       string `json:"name"`
		CNIVersion string `json:"cniVersion"`
	}
	_ = json.Unmarshal(data, &conf)
	n.Name, n.CNIVersion, n.Plugins = conf.Name, conf.CNIVersion, []string{t}
	return n, nil
}

func pluginType(data []byte) (string, error) {
	var conf struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		return "", fmt.Errorf("error parsing configuration: %v", err)
	}
	if conf.Type == "" {
		return "", fmt.Errorf("error parsing configuration: missing 'type'")
	}
	return conf.Type, nil
}

// Load reads dir on this machine. A missing directory holds no network.
func Load(dir string) (Network, error) {
	des, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Network{}, fmt.Errorf("failed to read config file: %v: %w", err, ErrNotInitialized)
	}
	var entries []Entry
	for _, d := range des {
		// As libcni lists them: a symlink is a file, whatever it points to.
		entries = append(entries, Entry{Name: d.Name(), IsDir: d.IsDir()})
	}
	return Choose(dir, entries, func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) })
}

// MissingPlugins returns the plugin types of n that binDir lacks: setting up
// a pod's network then fails (libcni: failed to find plugin "X" in path).
func MissingPlugins(n Network, exists func(path string) bool, binDir string) []string {
	var out []string
	for _, p := range n.Plugins {
		if !exists(filepath.Join(binDir, p)) {
			out = append(out, p)
		}
	}
	return out
}

// FromListing is Choose over the cni/list script's output: the network a node's
// runtime would load, read is called for the files it needs.
func FromListing(listing []byte, read func(name string) ([]byte, error)) (Network, error) {
	var entries []Entry
	for _, l := range strings.Split(strings.TrimSpace(string(listing)), "\n") {
		if l != "" {
			entries = append(entries, Entry{Name: strings.TrimSuffix(l, "/"), IsDir: strings.HasSuffix(l, "/")})
		}
	}
	return Choose(ConfDir, entries, read)
}
