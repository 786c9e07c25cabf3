package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeRefusesABadKeysFile starts the real `loom serve` with keys files
// that bind a key to no tenant or one key to two tenants: it exits non-zero
// before serving, naming the file's line, and never says it serves.
func TestServeRefusesABadKeysFile(t *testing.T) {
	for _, tc := range []struct{ name, keys, want string }{
		{"empty tenant", "acme:" + keyAcme + "\n:" + keyOther + "\n", "line 2: "},
		{"one key, two tenants", "acme:" + keyAcme + "\n# the same key\nother:" + keyAcme + "\n", "line 3: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "keys")
			if err := os.WriteFile(path, []byte(tc.keys), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(binary(t), "serve", "--addr", "127.0.0.1:0", "--store", "memory://", "--keys", path)
			cmd.Env = append(os.Environ(), "LOOM_API_KEYS=")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			served := false
			lines := make(chan struct{})
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					out.WriteString(sc.Text() + "\n")
					if _, ok := listeningURL(sc.Text()); ok {
						served = true
						cmd.Process.Kill()
					}
				}
			}()
			timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
			defer timer.Stop()
			<-lines
			err = cmd.Wait()
			if served {
				t.Fatalf("loom serve started with the keys file:\n%s", out.String())
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
				t.Fatalf("exit: %v, want a non-zero exit code\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), path+": "+tc.want) {
				t.Errorf("stderr %q does not name %s%s", out.String(), path+": ", tc.want)
			}
		})
	}
}

// TestServeReadsAPIKeysFromTheCommandsEnvironment checks that `loom
// serve` reads $LOOM_API_KEYS through Env.Getenv, as it reads $LOOM_STORE,
// rather than from the process's environment: auth.Load calls os.Getenv,
// so the injected environment is ignored, and keys in the real
// environment turn the loopback-only rule off for a command whose
// environment has none.
func TestServeReadsAPIKeysFromTheCommandsEnvironment(t *testing.T) {
	t.Setenv("LOOM_API_KEYS", "acme:key-acme-0123456789abcdef")
	var stdout, stderr bytes.Buffer
	e := &Env{
		Stdin:      strings.NewReader(""),
		Stdout:     &stdout,
		Stderr:     &stderr,
		Getenv:     func(string) string { return "" }, // no keys in the command's environment
		IsTerminal: func(any) bool { return false },
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// 192.0.2.1 (TEST-NET-1) is not loopback and not on this machine:
	// without keys the command must refuse it before listening.
	code := e.Main(ctx, []string{"serve", "--addr", "192.0.2.1:0", "--store", "memory://"})
	if code != 1 || !strings.Contains(stderr.String(), "loopback only") {
		t.Errorf("serve on 192.0.2.1 with no keys in its environment: exit %d, stderr %q; want the loopback-only refusal", code, stderr.String())
	}
}
