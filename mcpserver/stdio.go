package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

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
//
// The checks run in the SDK's own reads of r: the transport starts no
// goroutine, so a session that ends stops reading r, and what follows its
// last message stays in r (less what the reads had buffered) for whoever
// reads it next. A session closed while the SDK waits on r (its context
// ended) ends that read at once when r takes a read deadline (an *os.File
// pipe, a net.Conn: the deadline is lifted again after); otherwise the
// read waits for r's next line, as with mcp.IOTransport, and drops it
// unanswered.
func IOTransport(r io.Reader, w io.Writer) mcp.Transport {
	out := &lockedWriter{w: w}
	return &mcp.IOTransport{Reader: &lineGuard{r: r, br: bufio.NewReaderSize(r, 64<<10), out: out}, Writer: out}
}

// deadliner is a reader whose blocked read a deadline ends: *os.File (a
// pipe, not a terminal or a blocking stdin), net.Conn.
type deadliner interface {
	SetReadDeadline(time.Time) error
}

// lineGuard reads r a line at a time, passing on the lines that pass the
// checks and answering the others on out, until r ends. Close does not
// close r.
type lineGuard struct {
	r   io.Reader
	br  *bufio.Reader
	out io.Writer
	// mu guards closed, set by Close, after which a read returns io.EOF
	// and answers nothing; reading, set while a read waits on r; and
	// deadline, set when Close gave r a deadline to end that read, which
	// the read lifts when it ends.
	mu                        sync.Mutex
	closed, reading, deadline bool
	// line holds the bytes of the line being read; pending is what of
	// the lines that passed is not read yet.
	line, pending []byte
	// passing is set in a line over the SDK's limit, whose rest is passed
	// on unchecked; err is r's error, given once pending is read.
	passing bool
	err     error
}

// Read implements io.Reader.
func (g *lineGuard) Read(p []byte) (int, error) {
	if !g.begin() {
		return 0, io.EOF
	}
	for len(g.pending) == 0 && g.err == nil {
		g.next()
	}
	if g.end() {
		g.pending, g.err = nil, io.EOF
	}
	if len(g.pending) > 0 {
		n := copy(p, g.pending)
		g.pending = g.pending[n:]
		return n, nil
	}
	return 0, g.err
}

// begin starts a read; it reports false after Close.
func (g *lineGuard) begin() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reading = !g.closed
	return g.reading
}

// end ends a read, lifting the deadline Close gave r; it reports whether
// Close was called.
func (g *lineGuard) end() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.deadline {
		g.r.(deadliner).SetReadDeadline(time.Time{})
		g.deadline = false
	}
	g.reading = false
	return g.closed
}

// isClosed reports whether Close was called.
func (g *lineGuard) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// next reads r up to the end of a line, or of a piece of a line over the
// SDK's limit, and makes it pending if it passes; it answers a line that
// does not.
func (g *lineGuard) next() {
	g.line = g.line[:0]
	for {
		chunk, err := g.br.ReadSlice('\n')
		g.line = append(g.line, chunk...)
		full := errors.Is(err, bufio.ErrBufferFull)
		if full && !g.passing && len(g.line) <= mcp.DefaultMaxLineLength {
			continue
		}
		if !full && err != nil {
			g.err = err
		}
		if full || g.passing {
			// Over the SDK's limit of a line: passed on, unchecked, for
			// the SDK to refuse, as it did without the checks.
			g.pending, g.passing = g.line, full
			return
		}
		if len(bytes.TrimSpace(g.line)) > 0 {
			if answer := checkLine(g.line); answer != nil {
				if g.isClosed() {
					g.err = io.EOF
					return
				}
				if answer.id != nil || !isNotification(g.line) {
					g.out.Write(answer.encode())
				}
				g.line = g.line[:0]
				if err != nil {
					return
				}
				continue
			}
		}
		g.pending = g.line
		return
	}
}

// Close implements io.Closer: it ends a read of r that waits, when r takes
// a deadline; it does not close r.
func (g *lineGuard) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if d, ok := g.r.(deadliner); ok && g.reading && !g.deadline {
		g.deadline = d.SetReadDeadline(time.Now()) == nil
	}
	return nil
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
