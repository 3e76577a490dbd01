package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/homelab-dev/homelab/infra/scripts"
	"github.com/homelab-dev/homelab/infra/ssh"
	"github.com/homelab-dev/homelab/roles/containerd"
	"github.com/homelab-dev/homelab/roles/netplan"
	"github.com/homelab-dev/homelab/roles/nodefacts"
)

// File is a file on a node. Its live state is its checksum and mode, so an
// edit on the node shows up as drift and the next up puts it back.
type File struct{}

type FileArgs struct {
	Connection Connection `pulumi:"connection"`
	Path       string     `pulumi:"path"`
	// Content is marked secret by the program for key material and tokens.
	Content string `pulumi:"content"`
	Mode    int    `pulumi:"mode"`
	// OnChange names the script (infra/scripts/onchange/) run after the
	// file is written, given its path: `sysctl`, `daemon-reload`. It must
	// be idempotent; it never runs when nothing changed.
	OnChange string `pulumi:"onChange,optional"`
	// Restarts is the unit that reads the file only when it starts. A
	// change of the declared content restarts it through its Service's
	// trigger; an edit on the node put back restarts it here, or the unit
	// would go on running on the edit.
	Restarts string `pulumi:"restarts,optional"`
}

type FileState struct {
	FileArgs
	// Sha256 and LiveMode are what is on the node ("" when absent).
	Sha256   string `pulumi:"sha256"`
	LiveMode int    `pulumi:"liveMode"`
}

func (f *File) Annotate(a infer.Annotator) {
	a.Describe(&f, "A file on a node, written atomically over SSH; its live checksum and mode are read back.")
	a.SetToken("index", "File")
}

func sum(content string) string {
	s := sha256.Sum256([]byte(content))
	return hex.EncodeToString(s[:])
}

func (File) Create(ctx context.Context, req infer.CreateRequest[FileArgs]) (infer.CreateResponse[FileState], error) {
	st := FileState{FileArgs: req.Inputs, Sha256: sum(req.Inputs.Content), LiveMode: req.Inputs.Mode}
	id := req.Inputs.Connection.Node + ":" + req.Inputs.Path
	if req.DryRun {
		return infer.CreateResponse[FileState]{ID: id, Output: st}, nil
	}
	return infer.CreateResponse[FileState]{ID: id, Output: st}, writeFile(ctx, req.Inputs)
}

// onChangeScript is the script a File's OnChange names, with the file's
// path; an unknown name is an error before anything is written.
func onChangeScript(a FileArgs) (scripts.Script, error) {
	name := "onchange/" + a.OnChange
	if !slices.Contains(scripts.Names(), name) {
		return scripts.Script{}, fmt.Errorf("%s: %s: onChange %q names no script under infra/scripts/onchange", a.Connection.Node, a.Path, a.OnChange)
	}
	return scripts.Render(name, struct{ Path string }{a.Path}), nil
}

func writeFile(ctx context.Context, a FileArgs) error {
	var onChange scripts.Script
	if a.OnChange != "" {
		s, err := onChangeScript(a)
		if err != nil {
			return err
		}
		onChange = s
	}
	c, err := dial(ctx, a.Connection)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Upload(ctx, a.Path, []byte(a.Content), os.FileMode(a.Mode)); err != nil {
		return fmt.Errorf("%s: writing %s: %w", a.Connection.Node, a.Path, err)
	}
	if a.OnChange != "" {
		_, err = must(ctx, c, a.Connection.Node, "applying "+a.Path, onChange)
	}
	return err
}

// fileRead: a file on a node refusing the key reads as absent, so the up
// writes it as declared with the current key.
var fileRead = keepOrRecheck(func(st FileState) FileState {
	st.Sha256, st.LiveMode = "", 0
	return st
})

func (File) Read(ctx context.Context, req infer.ReadRequest[FileArgs, FileState]) (infer.ReadResponse[FileArgs, FileState], error) {
	ctx = reading(ctx)
	st, err := readNode(ctx, req.State.Connection, req.State, fileRead, func(c ssh.Executor) (FileState, error) {
		st := req.State
		live, ok, err := configOf(ctx).batches.files.get(ctx, req.State.Connection, c, st.Path)
		if err != nil {
			return st, err
		}
		st.Sha256, st.LiveMode = "", 0
		if ok {
			st.LiveMode, st.Sha256 = live.Mode, live.Sha256
		}
		return st, nil
	})
	if err != nil {
		return infer.ReadResponse[FileArgs, FileState]{}, err
	}
	return infer.ReadResponse[FileArgs, FileState]{ID: req.ID, Inputs: req.Inputs, State: st}, nil
}

// fileChanges compares what should be on the node with what was last seen
// there: content and mode against the live checksum and mode, so drift
// made on the node is repaired even when the inputs did not change. Only
// content and mode cost a write; a changed connection alone (a new key, a
// re-addressed node) does not touch the node.
func fileChanges(in FileArgs, st FileState) changeSet {
	d := changeSet{}
	if in.Connection.Node != st.Connection.Node || in.Path != st.Path {
		d.replace("path")
	}
	if sum(in.Content) != st.Sha256 {
		d.update("content")
	}
	if in.Mode != st.LiveMode {
		d.update("mode")
	}
	if in.Connection != st.Connection && !d.has("path") {
		d.update("connection")
	}
	return d
}

func (File) Diff(ctx context.Context, req infer.DiffRequest[FileArgs, FileState]) (infer.DiffResponse, error) {
	return fileChanges(req.Inputs, req.State).diff(true), nil
}

func (File) Update(ctx context.Context, req infer.UpdateRequest[FileArgs, FileState]) (infer.UpdateResponse[FileState], error) {
	st := FileState{FileArgs: req.Inputs, Sha256: sum(req.Inputs.Content), LiveMode: req.Inputs.Mode}
	if req.DryRun {
		return infer.UpdateResponse[FileState]{Output: st}, nil
	}
	d := fileChanges(req.Inputs, req.State)
	if d.has("content", "mode") {
		if err := writeFile(ctx, req.Inputs); err != nil {
			return infer.UpdateResponse[FileState]{}, err
		}
	}
	if d.has("content") && req.Inputs.Restarts != "" && req.Inputs.Content == req.State.Content {
		if err := restartAfterRepair(ctx, req.Inputs); err != nil {
			return infer.UpdateResponse[FileState]{}, err
		}
	}
	return infer.UpdateResponse[FileState]{Output: st}, nil
}

// restartAfterRepair restarts the unit of a file whose declared content
// did not change but whose copy on the node did (drift put back): no
// trigger changed, so no Service restarts it. A unit that does not run is
// left alone: it reads the file when it starts, which its Service sees
// to; on a replaced machine it may not even be installed yet (its other
// files come in the same up), and restarting it failed there.
func restartAfterRepair(ctx context.Context, a FileArgs) error {
	c, err := dial(ctx, a.Connection)
	if err != nil {
		return err
	}
	defer c.Close()
	node := a.Connection.Node
	out, _, err := query(ctx, c, unitScript("state", a.Restarts))
	if err != nil {
		return err
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); lines[len(lines)-1] != "active" {
		p.GetLogger(ctx).Infof("%s: %s is put back; %s does not run (%s), and reads it when it starts", node, a.Path, a.Restarts, lines[len(lines)-1])
		return nil
	}
	p.GetLogger(ctx).Infof("%s: %s was edited on the node and is put back: restarting %s, which reads it only when it starts", node, a.Path, a.Restarts)
	return startUnit(ctx, c, node, a.Restarts, "restart")
}

// keyMaterial are files whose loss on a running control-plane node loses
// the cluster's identity or data: the CA and service-account keys and the
// secrets encryption key.
func keyMaterial(path string) bool {
	return (strings.HasPrefix(path, "/etc/kubernetes/pki/") && strings.HasSuffix(path, ".key")) || strings.HasPrefix(path, "/etc/kubernetes/encryption/")
}

// Delete removes the file. Key material goes from a node whose control
// plane still runs only with the user's consent for that node, and a file
// on a node that cannot be reached is forgotten only with it.
func (File) Delete(ctx context.Context, req infer.DeleteRequest[FileState]) (infer.DeleteResponse, error) {
	node, path := req.State.Connection.Node, req.State.Path
	if path == netplan.Path {
		// A Netplan owns it now (a File wrote it before), and takes no
		// node's static address away either.
		return infer.DeleteResponse{}, nil
	}
	if path == containerd.ConfigPath {
		// The user takes the runtime back (containerRuntime.manage:
		// false) with the configuration it runs on: without it, the
		// next restart of containerd would fall back to cgroupfs.
		return infer.DeleteResponse{}, nil
	}
	c, err := dial(ctx, req.State.Connection)
	if err != nil {
		return infer.DeleteResponse{}, forgetUnreachable(ctx, node, "removing "+path, path, err)
	}
	defer c.Close()
	if keyMaterial(path) && !consented(ctx, node) {
		out, _, err := query(ctx, c, controlPlaneRuns())
		if err != nil {
			return infer.DeleteResponse{}, err
		}
		if strings.TrimSpace(out) == "running" {
			return infer.DeleteResponse{}, refused(node, "removing "+path, "delete "+path+" from a node whose control plane still runs on it")
		}
	}
	_, err = must(ctx, c, node, "removing "+path, removeFile(path))
	return infer.DeleteResponse{}, err
}

type removeArgs struct{ Path string }

func removeFile(path string) scripts.Script {
	return scripts.Render("file/remove", removeArgs{Path: path})
}

type controlPlaneArgs struct{ Manifest string }

// controlPlaneRuns asks whether the node runs a control plane (prints
// "running").
func controlPlaneRuns() scripts.Script {
	return scripts.Render("file/control-plane-runs", controlPlaneArgs{Manifest: nodefacts.Manifest(nodefacts.KubeAPIServer)})
}
