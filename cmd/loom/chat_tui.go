package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/bubbles/textinput"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
)

// runTUI is loom chat on a terminal, on Bubble Tea: the conversation above
// (streaming as it comes), a prompt below, and a status line.
func runTUI(ctx context.Context, s *chatSession, in io.Reader, out io.Writer) error {
	m := newChatModel(ctx, s)
	p := tea.NewProgram(m, tea.WithInput(in), tea.WithOutput(out), tea.WithContext(ctx))
	// The conversation's changes reach the program from a goroutine of
	// their own: Notify never blocks the conversation's loop.
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-s.relay:
				p.Send(changed{})
			}
		}
	}()
	_, err := p.Run()
	close(stop)
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

// newChatModel returns the program's model, showing s's conversation.
func newChatModel(ctx context.Context, s *chatSession) *chatModel {
	ti := textinput.New()
	ti.Placeholder = "a message, or /help"
	ti.Prompt = "› "
	ti.Focus()
	ti.CharLimit = 0
	m := &chatModel{ctx: ctx, s: s, input: ti, view: viewport.New(80, 20)}
	m.t = &transcript{w: &m.done, live: true}
	m.t.follow(s)
	m.takeUp()
	return m
}

// changed says the conversation changed.
type changed struct{}

type chatModel struct {
	ctx    context.Context
	s      *chatSession
	input  textinput.Model
	view   viewport.Model
	t      *transcript
	done   strings.Builder // what t has shown, but for the streaming text
	note   string          // a hint, or the last command's error
	armed  bool            // a Ctrl-C on an idle prompt was pressed: the next quits
	width  int
	height int
}

var (
	statusStyle = lipgloss.NewStyle().Faint(true)
	noteStyle   = lipgloss.NewStyle().Italic(true)
)

func (m *chatModel) Init() tea.Cmd { return textinput.Blink }

func (m *chatModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	// The conversation is rendered again when it may have changed, or the
	// screen did; not for each key typed or blink of the cursor.
	redraw := true
	switch msg := msg.(type) {
	case changed:
		m.t.sync(m.s)
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.view.Width, m.view.Height = msg.Width, max(msg.Height-4, 3)
		m.input.Width = max(msg.Width-4, 10)
	case tea.KeyMsg:
		switch msg.Type {
		case tea.KeyCtrlC:
			if m.s.abort(m.t) {
				m.note, m.armed = "aborted", false
				break
			}
			if m.armed {
				return m, tea.Quit
			}
			m.note, m.armed = "press Ctrl-C again to quit", true
		case tea.KeyEnter:
			m.armed = false
			line := strings.TrimSpace(m.input.Value())
			m.input.Reset()
			if line == "" {
				break
			}
			m.note = ""
			if strings.HasPrefix(line, "/") {
				compact := isCompact(line, "/compact")
				if compact {
					m.t.compactRequested()
				}
				text, quit, err := m.s.command(m.ctx, line)
				if quit {
					return m, tea.Quit
				}
				if err != nil {
					if compact {
						m.t.compactFailed()
					}
					m.note = "error: " + err.Error()
				}
				if m.t.conv != m.s.conv {
					// Another conversation (/fork, /switch, /rollback):
					// shown whole, instead.
					m.done.Reset()
					m.t.follow(m.s)
					m.t.say(text)
					m.takeUp()
					break
				}
				m.t.say(text)
				break
			}
			if !strings.HasPrefix(line, "@async ") {
				m.s.abort(m.t) // as Send would, with the text kept
			}
			compact := isCompact(line, "@compact")
			if compact {
				m.t.compactRequested()
			}
			if err := m.s.send(m.ctx, line); err != nil {
				if compact {
					m.t.compactFailed()
				}
				m.note = "error: " + err.Error()
			}
			m.t.sync(m.s)
		default:
			m.armed, redraw = false, false
		}
	default:
		redraw = false
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	if redraw {
		m.refresh()
	}
	return m, cmd
}

// takeUp starts what the conversation just shown is to do (a fork's
// prompt, a turn a crash cut short), and says so.
func (m *chatModel) takeUp() {
	if text, err := m.s.takeUp(m.ctx); err != nil {
		m.note = "error: " + err.Error()
	} else if text != "" {
		m.note = text
	}
}

// refresh renders the conversation into the viewport, following its end.
func (m *chatModel) refresh() {
	text := m.done.String()
	if m.t.open {
		text += "loom: " + m.t.partial + "▍\n"
	}
	if m.view.Width > 0 {
		text = lipgloss.NewStyle().Width(m.view.Width).Render(text)
	}
	m.view.SetContent(text)
	m.view.GotoBottom()
}

func (m *chatModel) View() string {
	a := m.s.conv.Agent()
	status := fmt.Sprintf("%s · %s · %s", m.s.conv.ID(), a.Status(), m.s.conv.Mode())
	if u := a.Usage(); u.TotalTokens > 0 {
		status += fmt.Sprintf(" · %d tokens", u.TotalTokens)
	}
	var b strings.Builder
	b.WriteString(m.view.View())
	b.WriteString("\n")
	if m.note != "" {
		b.WriteString(noteStyle.Render(m.note))
	}
	b.WriteString("\n")
	b.WriteString(m.input.View())
	b.WriteString("\n")
	b.WriteString(statusStyle.Render(status))
	return b.String()
}
