package openai

import (
	"encoding/base64"
	"fmt"
	"mime"
	"net/url"
	"path"
	"strings"

	"github.com/loomthreads/loom/message"
	"github.com/loomthreads/loom/thread"
)

// dataRef is a message.Data in the forms the APIs take: exactly one of url,
// inline and fileID is set.
type dataRef struct {
	mediaType string
	url       string // an http(s) URL
	inline    string // a data: URI
	fileID    string // an id from the Files API
	name      string
}

func (r dataRef) image() bool { return strings.HasPrefix(r.mediaType, "image/") }

// asURL is the reference as a URL, for fields that take either kind.
func (r dataRef) asURL() string {
	if r.url != "" {
		return r.url
	}
	return r.inline
}

// filename is the name sent with inline files, which OpenAI requires.
func (r dataRef) filename() string {
	if r.name != "" {
		return r.name
	}
	if exts, _ := mime.ExtensionsByType(r.mediaType); len(exts) > 0 {
		return "file" + exts[0]
	}
	return "file"
}

// refOf reads a Data content. A URI without a scheme is taken for a file id,
// as message.Data documents; a media type missing from an http(s) URL is
// guessed from its extension.
func refOf(d message.Data) (dataRef, error) {
	r := dataRef{mediaType: strings.ToLower(d.MediaType), name: d.Name}
	switch {
	case len(d.Data) > 0:
		if r.mediaType == "" {
			return r, fmt.Errorf("data %q: inline data needs a media type: %w", d.Name, thread.ErrInvalid)
		}
		r.inline = "data:" + r.mediaType + ";base64," + base64.StdEncoding.EncodeToString(d.Data)
	case strings.HasPrefix(strings.ToLower(d.URI), "data:"):
		r.inline = d.URI
		if r.mediaType == "" {
			mt, _, _ := strings.Cut(d.URI[len("data:"):], ",")
			mt, _, _ = strings.Cut(mt, ";")
			r.mediaType = strings.ToLower(mt)
		}
	case d.URI == "":
		return r, fmt.Errorf("data %q: neither URI nor bytes: %w", d.Name, thread.ErrInvalid)
	case !strings.Contains(d.URI, ":"):
		r.fileID = d.URI
	default:
		u, err := url.Parse(d.URI)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return r, fmt.Errorf("data %q: OpenAI cannot fetch %.40q: %w", d.Name, d.URI, thread.ErrInvalid)
		}
		r.url = d.URI
		if r.mediaType == "" {
			r.mediaType, _, _ = strings.Cut(mime.TypeByExtension(path.Ext(u.Path)), ";")
		}
	}
	return r, nil
}
