package ssh

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/homelab-dev/homelab/infra/envvars"
)

// Event records one thing done on a node. It never holds file contents or
// stdin: they may be secrets. Commands are recorded as given, so callers
// pass secrets through RunInput's stdin or Upload, never in a command line.
type Event struct {
	Time time.Time `json:"time"`
	Node string    `json:"node"`
	// Kind is "run", "upload", "read", or "tunnel" for a change made
	// through a forwarded connection (Executor.Note).
	Kind string `json:"kind"`
	// Mutating is false for Query and Read: the caller's word that they
	// change nothing.
	Mutating bool `json:"mutating"`
	// Cmd is the command, or the remote path for upload and read.
	Cmd string `json:"cmd"`
}

// CommandLogEnv names a file that receives one JSON line per Event
// (OptionsFromEnv, WithCommandLog).
const CommandLogEnv = envvars.CommandLog

// appendEvent appends e as one line to the log at path. One write on an
// O_APPEND descriptor keeps lines whole when several provider processes
// share the file.
func appendEvent(path string, e Event) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("command log %s: %w", path, err)
	}
	_, err = f.Write(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("command log %s: %w", path, err)
	}
	return nil
}
