package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomthreads/loom/internal/jsonguard"
)

// IOTransport returns a transport of newline-delimited JSON-RPC over r and
// w, as the SDK's mcp.IOTransport (and stdio, one message a line), that
// first checks each line's bytes: a message that is not UTF-8 (or holds a
// \u escape of a lone surrogate), which decoding would turn into U+FFFD,
// or that nests deeper than maxBodyDepth is answered on w with a -32700
// JSON-RPC error (with its id, when it has one; a notification gets no
// answer) and goes no further; the connection goes on. Closing the
// transport closes neither r nor w.
func IOTransport(r io.Reader, w io.Writer) mcp.Transport {
	pr, pw := io.Pipe()
	out := &lockedWriter{w: w}
	go guardLines(r, pw, out)
	return &mcp.IOTransport{Reader: pr, Writer: out}
}

// guardLines copies the lines of r that pass the checks to pw, answering
// the others on out, until r ends or pw is closed.
func guardLines(r io.Reader, pw *io.PipeWriter, out io.Writer) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	passing := false // the rest of a line over the SDK's limit
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) && !passing && len(line) <= mcp.DefaultMaxLineLength {
			continue
		}
		if errors.Is(err, bufio.ErrBufferFull) || passing {
			// Over the SDK's limit of a line: passed on, unchecked, for
			// the SDK to refuse, as it did without the checks.
			if _, werr := pw.Write(line); werr != nil {
				return
			}
			line, passing = line[:0], errors.Is(err, bufio.ErrBufferFull)
			if err == nil || passing {
				continue
			}
		} else if len(bytes.TrimSpace(line)) > 0 {
			if answer := checkLine(line); answer != nil {
				if answer.id != nil || !isNotification(line) {
					out.Write(answer.encode())
				}
			} else if _, werr := pw.Write(line); werr != nil {
				return
			}
		}
		line = line[:0]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			pw.CloseWithError(err)
			return
		}
	}
}

// checkLine returns the answer to a line that is not UTF-8 or nests too
// deeply, or nil.
func checkLine(line []byte) *rpcError {
	err := jsonguard.Check(line, maxBodyDepth)
	if err == nil {
		return nil
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	e := &rpcError{code: codeParseError, message: fmt.Sprintf("parse error: %s", err)}
	if json.Unmarshal(line, &m) == nil && len(m.ID) > 0 && validID(m.ID) {
		e.id = m.ID
	}
	return e
}

// isNotification reports whether line is a message without an id: a
// notification (or a response to nothing), which gets no answer.
func isNotification(line []byte) bool {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
	}
	return json.Unmarshal(line, &m) == nil && len(m.ID) == 0 && len(m.Method) > 0
}

// lockedWriter writes whole messages to w, one at a time: the SDK's and
// the checks' answers share it. Close does not close w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }
