// Package scripts is the one home of the shell homelab runs on nodes: each
// script is a file here (a text/template when it takes values), embedded
// in the binary and rendered by Render alone, with one quoting function
// and one header. Nothing else builds remote shell, so every command a
// node receives can be read, golden-tested and shellchecked as a file.
//
// Scripts are written for POSIX sh (Debian's dash, and bash, which SSH
// runs for root on Debian and Ubuntu): no bashisms.
package scripts

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"text/template"

	"github.com/homelab-dev/homelab/infra/scripts/shell"
)

//go:embed */*.sh
var files embed.FS

// HeaderPrefix starts every rendered script's first line, followed by the
// script's name: the command log, the lab's fakes and a reader of a node's
// process list all tell scripts apart by it.
const HeaderPrefix = "# homelab: "

// header follows the name line of every script. set -e so a failed step
// stops the script instead of running the next on a wrong premise; set -u
// so a misspelt variable is an error, not an empty word; pipefail where
// the shell has it (bash; dash before 0.5.13 lacks it), so a pipeline
// fails when any of its commands does.
const header = `set -eu
# shellcheck disable=SC3040
(set -o pipefail) 2>/dev/null && set -o pipefail
`

// Script is a rendered script, ready to send: Render is the only way to
// make one.
type Script struct {
	name, text string
}

// Name is the script's file name under this package, without ".sh":
// "kubeadm/reset".
func (s Script) Name() string { return s.name }

// String is the whole script: name line, header and body.
func (s Script) String() string { return s.text }

// templates share one namespace, so one script can include another
// ({{template "nodefacts/expiry" .}}) rather than be glued to it in Go.
var templates = parse()

// funcs are the only helpers a script template has. q makes a value one
// shell word; every value a template inserts goes through it unless it
// is a number or a constant of the product's own.
var funcs = template.FuncMap{
	"q": shell.Quote,
	// qs quotes every element: a list of words.
	"qs": func(vs []string) string {
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = shell.Quote(v)
		}
		return strings.Join(out, " ")
	},
}

func parse() map[string]*template.Template {
	root := template.New("").Funcs(funcs).Option("missingkey=error")
	out := map[string]*template.Template{}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(p, ".sh")
		t, err := root.New(name).Parse(string(b))
		if err != nil {
			return err
		}
		out[name] = t
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("scripts: %v", err))
	}
	return out
}

// Names lists every script, sorted.
func Names() []string {
	out := make([]string, 0, len(templates))
	for n := range templates {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Render renders the script name (its path here without ".sh") with data,
// a struct whose fields the template reads. A script that takes no values
// gets nil. An unknown name or a template that does not fit its data is a
// bug in this binary, which every script's golden test catches: Render
// panics on it rather than send a node half a script.
func Render(name string, data any) Script {
	t, ok := templates[name]
	if !ok {
		panic(fmt.Sprintf("scripts: no script %q", name))
	}
	var b bytes.Buffer
	b.WriteString(HeaderPrefix + name + "\n" + header)
	if err := t.Execute(&b, data); err != nil {
		panic(fmt.Sprintf("scripts: %s: %v", name, err))
	}
	return Script{name: name, text: b.String()}
}

// NameOf is the name of the script cmd is a rendering of, read from its
// first line ("", false for a command no script made).
func NameOf(cmd string) (string, bool) {
	first, _, _ := strings.Cut(cmd, "\n")
	name, ok := strings.CutPrefix(first, HeaderPrefix)
	if !ok || !fs.ValidPath(name) || name == "." {
		return "", false
	}
	return name, true
}
