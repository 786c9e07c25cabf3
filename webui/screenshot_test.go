package webui_test

import (
	"bytes"
	"encoding/base64"
	"flag"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var update = flag.Bool("update", false, "write docs/screenshots/thread.png")

// chart is a small PNG, for a message with image data.
func chart() string {
	img := image.NewRGBA(image.Rect(0, 0, 120, 60))
	for x := range 120 {
		for y := range 60 {
			c := color.RGBA{0xee, 0xf2, 0xff, 0xff}
			if h := 10 + (x/20)*8; x%20 < 14 && 60-y < h {
				c = color.RGBA{0x1d, 0x4e, 0xd8, 0xff}
			}
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// TestScreenshots renders the thread page of a thread with a fork family, a
// history and checkpoints at 1280×800; with -update it writes the picture
// to docs/screenshots/thread.png.
func TestScreenshots(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	e := newEnv(t, nil)
	u := e.url
	call(t, u, "", "POST", "/v1/threads", map[string]any{"id": "support-4172", "title": "Order 4172 is late", "labels": map[string]string{"team": "support"},
		"messages": []any{
			textMsg("system", "You are the support agent of a bike shop. Be brief."),
			textMsg("user", "My order 4172 was due on Monday. Where is it?"),
		}}, nil)
	call(t, u, "", "POST", "/v1/threads/support-4172/messages", map[string]any{"messages": []any{
		map[string]any{"role": "assistant", "contents": []any{
			map[string]any{"type": "reasoning", "text": "Look the order up before answering."},
			map[string]any{"type": "function_call", "call_id": "call_1", "name": "order_status", "arguments": `{"order":4172}`},
		}},
		map[string]any{"role": "tool", "contents": []any{
			map[string]any{"type": "function_result", "call_id": "call_1", "result": `{"status":"in transit","carrier":"DHL","eta":"Thursday"}`},
		}},
	}}, nil)
	call(t, u, "", "POST", "/v1/threads/support-4172/checkpoints", map[string]any{"name": "looked-up"}, nil)
	call(t, u, "", "POST", "/v1/threads/support-4172/messages", map[string]any{"messages": []any{
		map[string]any{"role": "assistant", "contents": []any{
			map[string]any{"type": "text", "text": "It is in transit with DHL and should arrive on Thursday. Here is how this week's deliveries are going:"},
			map[string]any{"type": "data", "media_type": "image/png", "data": chart(), "name": "deliveries.png"},
			map[string]any{"type": "usage", "input_tokens": 412, "output_tokens": 38, "total_tokens": 450},
		}},
		textMsg("user", "Thursday is too late, I need it for a race on Wednesday."),
	}}, nil)
	var msgs struct{ Messages []struct{ ID string } }
	call(t, u, "", "GET", "/v1/threads/support-4172/messages", nil, &msgs)
	var refund, express struct{ ID string }
	call(t, u, "", "POST", "/v1/threads/support-4172/fork", map[string]any{"at": msgs.Messages[3].ID, "id": "support-4172-refund", "title": "Offer a refund"}, &refund)
	call(t, u, "", "POST", "/v1/threads/support-4172/fork", map[string]any{"at": msgs.Messages[5].ID, "id": "support-4172-express", "title": "Send a new one express"}, &express)
	call(t, u, "", "POST", "/v1/threads/support-4172-express/fork", map[string]any{"id": "support-4172-express-b", "title": "Express, pick-up in store"}, nil)
	appendMsg(t, u, "support-4172", "assistant", "I am sorry. I can send a replacement by express today, free of charge: it would arrive on Tuesday. Shall I?")
	appendMsg(t, u, "support-4172", "user", "Yes please, same address.")

	ctx := tab(t, browser, 30*time.Second)
	run(t, ctx, "the thread page",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u+"/#/threads/support-4172"),
		waitJS(messagesContain("same address")),
		waitJS(`document.querySelectorAll('#fork-tree a.node').length === 4`),
		waitJS(`document.querySelectorAll('#history li').length >= 5`),
		chromedp.Click(chromedp.CSS(`#messages details.tool-call > summary`)),
		waitJS(`document.querySelector('#messages img')?.complete`),
		chromedp.Evaluate[chromedp.Void](`document.activeElement.blur(); document.querySelector('#scroller').scrollTop = 1e6`),
	)
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Width != 1280 || cfg.Height != 800 {
		t.Errorf("screenshot is %d×%d, want 1280×800", cfg.Width, cfg.Height)
	}
	if !*update {
		return
	}
	path := filepath.Join("..", "docs", "screenshots", "thread.png")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}
