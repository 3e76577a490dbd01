package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads, defaults and validates an inventory file. Warnings come back
// even when the inventory is valid; the error lists every problem at once.
// The files it names (ssh.privateKey, ssh.knownHosts, cluster.cilium.chart,
// cluster.packages.keyring) come back as absolute paths: ~/ is the home
// directory and a relative path is relative to the inventory's own
// directory, as in a kubeconfig, so the inventory means the same whatever
// directory a command runs in (the Pulumi CLI runs the program in its main
// folder).
func Load(path string) (*Inventory, []*Problem, error) {
	return load(path, false)
}

func load(path string, files bool) (*Inventory, []*Problem, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading inventory: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading inventory: %w", err)
	}
	return parse(data, filepath.Dir(abs), files)
}

// Parse is Load for bytes already read; relative file paths in them are
// relative to the working directory.
func Parse(data []byte) (*Inventory, []*Problem, error) {
	return parse(data, "", false)
}

func parse(data []byte, dir string, files bool) (*Inventory, []*Problem, error) {
	inv, pos, err := decode(data)
	if err != nil {
		return nil, nil, err
	}
	inv.ApplyDefaults()
	inv.resolvePaths(dir)
	warnings, err := validate(inv, pos, files)
	if err != nil {
		return nil, warnings, err
	}
	inv.canonicalize()
	return inv, warnings, nil
}

// canonicalize writes what the user may spell several ways in the one form
// every consumer renders and compares. netplan takes a MAC only as six
// colon-separated pairs: 52-54-00-0A-00-78 in the netplan file would leave
// the node without its static address at its next boot.
func (inv *Inventory) canonicalize() {
	for i := range inv.Nodes {
		if hw, err := net.ParseMAC(inv.Nodes[i].MAC); err == nil && len(hw) == 6 {
			inv.Nodes[i].MAC = hw.String()
		}
	}
}

// positions maps field paths to the line they were declared on.
type positions map[string]int

func (p positions) line(path string) int {
	if p == nil {
		return 0
	}
	// A problem about a missing field points at its parent's line.
	for path != "" {
		if l, ok := p[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// decode parses the YAML strictly: unknown fields and values of the wrong
// kind are reported with their path and line, all at once, before anything
// is decoded into the model.
func decode(data []byte) (*Inventory, positions, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, &Problem{Path: "(file)", Message: "the inventory is empty; start from inventory/homelab.yaml"}
		}
		return nil, nil, &Problem{Path: "(file)", Message: fmt.Sprintf("not valid YAML: %v", err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, nil, &Problem{Path: "(file)", Line: extra.Line, Message: "more than one YAML document; keep one inventory per file"}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	ps := &problems{pos: positions{}}
	w := &walker{ps: ps, sizes: map[*yaml.Node]int{}}
	w.check(root, reflect.TypeOf(Inventory{}), "")
	if err := ps.err(); err != nil {
		return nil, ps.pos, err
	}
	var inv Inventory
	if err := root.Decode(&inv); err != nil {
		// check() mirrors the decoder's rules, so this is a bug, not bad input.
		return nil, ps.pos, &Problem{Path: "(file)", Message: fmt.Sprintf("cannot decode: %v", err)}
	}
	return &inv, ps.pos, nil
}

// maxAliasedValues bounds how many YAML values the aliases of one
// inventory may stand for, counted expanded: a few bytes of alias can
// stand for a whole anchored subtree, so nested or repeated aliases in a
// small file stand for billions of values (the "billion laughs"), each
// walked, checked and decoded. An inventory sharing labels or taints
// between nodes through anchors stays far below it.
const maxAliasedValues = 10000

// walker checks one YAML tree; it counts the values aliases stand for.
type walker struct {
	ps *problems
	// aliased is the count of values reached through aliases so far; an
	// alias is charged its whole expansion before it is walked, so the
	// walk never goes past the bound.
	aliased int
	inAlias int
	over    bool
	// sizes memoizes each node's expanded size (capped), so sizing a
	// nested alias bomb is linear in the file, not in its expansion.
	sizes map[*yaml.Node]int
}

// check walks the YAML tree against the Go type, recording every field's
// line and reporting unknown fields and kind mismatches.
func (w *walker) check(n *yaml.Node, t reflect.Type, path string) {
	ps := w.ps
	if n.Kind == yaml.AliasNode && w.over {
		return
	}
	if path != "" {
		ps.pos[path] = n.Line
	}
	if n.Kind == yaml.AliasNode {
		if w.inAlias == 0 {
			w.aliased += w.size(n)
			if w.aliased > maxAliasedValues {
				w.over = true
				ps.errorf(orTop(path), "the aliases up to here stand for more than %d values once expanded; write the values out, or alias less (each *alias counts its anchor's whole content)", maxAliasedValues)
				return
			}
		}
		w.inAlias++
		defer func() { w.inAlias-- }()
	}
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Tag == "!!null" {
		return
	}
	name := orTop(path)
	switch t.Kind() {
	case reflect.Pointer:
		w.check(n, t.Elem(), path)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			ps.errorf(name, "expected a mapping of fields, found %s", describe(n))
			return
		}
		fields := map[string]reflect.Type{}
		var known []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			fields[tag] = f.Type
			known = append(known, tag)
		}
		sort.Strings(known)
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			child := joinPath(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				ps.pos[child] = k.Line
				ps.errorf(child, "unknown field %q; known fields here: %s (field names are case-sensitive)", k.Value, strings.Join(known, ", "))
				continue
			}
			if seen[k.Value] {
				ps.pos[child] = k.Line
				ps.errorf(child, "field %q is set twice; keep one", k.Value)
				continue
			}
			seen[k.Value] = true
			w.check(v, ft, child)
			ps.pos[child] = k.Line
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			ps.errorf(name, "expected a list, found %s", describe(n))
			return
		}
		for i, c := range n.Content {
			w.check(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			ps.errorf(name, "expected a mapping, found %s", describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			child := path + "[" + strconv.Quote(k.Value) + "]"
			ps.pos[child] = k.Line
			w.check(v, t.Elem(), child)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			ps.errorf(name, "expected a single value, found %s", describe(n))
		}
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			ps.errorf(name, "expected a whole number, found %s", describe(n))
			return
		}
		if _, err := strconv.ParseInt(n.Value, 0, 32); err != nil {
			ps.errorf(name, "%s is not a whole number in range", n.Value)
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			ps.errorf(name, "expected true or false, found %s", describe(n))
		}
	}
}

// size is how many values n stands for with its aliases expanded, capped
// just past the bound.
func (w *walker) size(n *yaml.Node) int {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if s, ok := w.sizes[n]; ok {
		return s
	}
	// Counted as over the bound while being sized, so a node that
	// contains itself ends the count instead of recursing forever.
	w.sizes[n] = maxAliasedValues + 1
	s := 1
	for _, c := range n.Content {
		if s += w.size(c); s > maxAliasedValues {
			s = maxAliasedValues + 1
			break
		}
	}
	w.sizes[n] = s
	return s
}

func orTop(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

func joinPath(parent, field string) string {
	if parent == "" {
		return field
	}
	return parent + "." + field
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// resolvePaths makes the inventory's file paths absolute: ~/ against the
// home directory, others against dir (the working directory when empty).
func (inv *Inventory) resolvePaths(dir string) {
	for _, p := range []*string{&inv.SSH.PrivateKey, &inv.SSH.KnownHosts, &inv.Cluster.Cilium.Chart, &inv.Cluster.Packages.Keyring} {
		*p = ResolvePath(*p, dir)
	}
	if r := inv.Cluster.ContainerRuntime.RuntimeRepository(); r != nil {
		r.Keyring = ResolvePath(r.Keyring, dir)
	}
	if s3 := inv.Cluster.Etcd.SnapshotsS3(); s3 != nil {
		s3.Credentials.File = ResolvePath(s3.Credentials.File, dir)
		s3.CAFile = ResolvePath(s3.CAFile, dir)
	}
}

// ResolvePath is how every file path the user gives is read: ~/ is the home
// directory, a relative path is relative to dir (the working directory when
// dir is empty), "" stays "".
func ResolvePath(p, dir string) string {
	if p == "" {
		return ""
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
		return p
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	if dir == "" {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
		return p
	}
	return filepath.Join(dir, p)
}
