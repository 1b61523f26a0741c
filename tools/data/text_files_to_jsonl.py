#!/usr/bin/env python3
"""Turn plain-text files into JSON lines for `sextant preprocess`.

Each file becomes documents of whole paragraphs (blank-line separated), cut
near --document-chars characters, so a long manual gives many documents.
Used for the engine's loss curve on real text, e.g. Vim's manual, which
Debian ships in the vim-runtime package:

    python3 tools/data/text_files_to_jsonl.py /usr/share/vim/vim90/doc/*.txt \
        --output data/vim-doc.jsonl
    sextant preprocess --input data/vim-doc.jsonl --output-prefix data/vim-doc --append-eod
"""
import argparse
import json
import os
import sys


def documents(text, document_chars):
    paragraphs = [p for p in text.split("\n\n") if p.strip()]
    current = []
    size = 0
    for paragraph in paragraphs:
        current.append(paragraph)
        size += len(paragraph) + 2
        if size >= document_chars:
            yield "\n\n".join(current)
            current, size = [], 0
    if current:
        yield "\n\n".join(current)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="text files (UTF-8; undecodable bytes are replaced)")
    parser.add_argument("--output", required=True, help="JSON lines file to write")
    parser.add_argument("--document-chars", type=int, default=4000,
                        help="cut documents after about this many characters (default 4000)")
    args = parser.parse_args()
    if args.document_chars < 1:
        parser.error("--document-chars must be at least 1")
    count = 0
    chars = 0
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    partial = args.output + ".partial"
    with open(partial, "w", encoding="utf-8") as out:
        for path in args.files:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
            except OSError as e:
                os.remove(partial)
                sys.exit(f"text_files_to_jsonl: {path}: {e.strerror}")
            for doc in documents(text, args.document_chars):
                out.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
                count += 1
                chars += len(doc)
    os.replace(partial, args.output)
    print(f"wrote {args.output}: {count} documents, {chars} characters from {len(args.files)} files")


if __name__ == "__main__":
    main()
