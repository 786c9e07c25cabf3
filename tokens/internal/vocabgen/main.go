// Command vocabgen writes the compact vocabularies that package tokens
// embeds (see package vocabfile), from the .tiktoken files of
// github.com/pkoukk/tiktoken-go-loader. Run it with go generate in package
// tokens; TestCompactVocabularies checks that its output is up to date.
package main

import (
	"fmt"
	"os"

	"github.com/loomthreads/loom/tokens/internal/vocabfile"
	"github.com/pkoukk/tiktoken-go-loader/assets"
)

func main() {
	for _, name := range []string{"o200k_base", "cl100k_base"} {
		if err := write(name); err != nil {
			fmt.Fprintln(os.Stderr, "vocabgen:", err)
			os.Exit(1)
		}
	}
}

func write(name string) error {
	src, err := assets.Assets.ReadFile(name + ".tiktoken")
	if err != nil {
		return err
	}
	out, err := vocabfile.Compact(src)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return os.WriteFile(name+".vocab", out, 0o644)
}
