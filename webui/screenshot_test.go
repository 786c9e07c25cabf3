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

var update = flag.Bool("update", false, "write the screenshots of docs/screenshots")

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

// seedSupport makes the thread "support-4172": a reasoning step, a tool
// call and its result, a checkpoint, an image, and a fork family of three
// (two forks of it, a fork of a fork).
func seedSupport(t testing.TB, u string) {
	t.Helper()
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
	call(t, u, "", "POST", "/v1/threads/support-4172/fork", map[string]any{"at": msgs.Messages[3].ID, "id": "support-4172-refund", "title": "Offer a refund"}, nil)
	call(t, u, "", "POST", "/v1/threads/support-4172/fork", map[string]any{"at": msgs.Messages[5].ID, "id": "support-4172-express", "title": "Send a new one express"}, nil)
	call(t, u, "", "POST", "/v1/threads/support-4172-express/fork", map[string]any{"id": "support-4172-express-b", "title": "Express, pick-up in store"}, nil)
	appendMsg(t, u, "support-4172-express", "assistant", "Express shipping costs 12 EUR and arrives on Tuesday. Shall I send a new one?")
	appendMsg(t, u, "support-4172", "assistant", "I am sorry. I can send a replacement by express today, free of charge: it would arrive on Tuesday. Shall I?")
	appendMsg(t, u, "support-4172", "user", "Yes please, same address.")
}

// TestScreenshots renders the pages the README shows at 1400×900, on the
// store the accessibility audit uses: a thread with its fork tree and
// timeline, a workflow waiting for input, a live conversation, and the
// diff of a thread and its fork. With -update (or
// LOOM_UPDATE_SCREENSHOTS=1) it writes them to docs/screenshots.
func TestScreenshots(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	e := newDemoEnv(t)
	seed(t, e)
	write := *update || os.Getenv("LOOM_UPDATE_SCREENSHOTS") == "1"
	for _, shot := range []struct {
		name, hash string
		ready      []chromedp.Action[chromedp.Void]
	}{
		{"thread", "#/threads/support-4172", []chromedp.Action[chromedp.Void]{
			waitJS(mainHas("same address")),
			waitJS(`document.querySelectorAll('#fork-tree a.node').length === 4`),
			waitJS(`document.querySelectorAll('#history li').length >= 5`),
			settle,
			chromedp.Click(chromedp.CSS(`#messages details.tool-call > summary`)),
			waitJS(`document.querySelector('#messages img')?.complete`),
			chromedp.Evaluate[chromedp.Void](`document.activeElement.blur(); document.querySelector('#scroller').scrollTop = 1e6`),
		}},
		{"workflow", "#/workflows/refund-4172", []chromedp.Action[chromedp.Void]{waitJS(mainHas("Approve a refund")), settle}},
		{"conversation", "#/conversations/launch", []chromedp.Action[chromedp.Void]{waitJS(mainHas("Which channels")), settle}},
		{"diff", "#/threads/support-4172/diff?to=support-4172-express", []chromedp.Action[chromedp.Void]{waitJS(mainHas("same address")), settle}},
	} {
		t.Run(shot.name, func(t *testing.T) {
			ctx := tab(t, browser, time.Minute)
			if err := installSettle(ctx); err != nil {
				t.Fatal(err)
			}
			run(t, ctx, "the "+shot.name+" page", append([]chromedp.Action[chromedp.Void]{
				chromedp.EmulateViewport(1400, 900),
				chromedp.Navigate(e.url + "/" + shot.hash),
			}, shot.ready...)...)
			run(t, ctx, "blur", chromedp.Evaluate[chromedp.Void](`document.activeElement?.blur()`))
			png1, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := png.DecodeConfig(bytes.NewReader(png1))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Width != 1400 || cfg.Height != 900 {
				t.Errorf("screenshot is %d×%d, want 1400×900", cfg.Width, cfg.Height)
			}
			if !write {
				return
			}
			path := filepath.Join("..", "docs", "screenshots", shot.name+".png")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, png1, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s", path)
		})
	}
}
