#!/usr/bin/env bash
# The book (docs/): installs mdBook when it is missing, builds the book into docs/book/, and
# fails on a broken link between its pages. mdBook itself does not fail on one, so every
# relative link of docs/src/*.md (and docs/src/**/*.md) is checked here: its file must be a page
# or an image of the book, and its #anchor, when it has one, a heading of the page it names.
#
#   scripts/book.sh
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.5.4
export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v mdbook >/dev/null || ! mdbook --version | grep -q "v$MDBOOK_VERSION"; then
  echo "installing mdbook $MDBOOK_VERSION"
  cargo install mdbook --locked --version "$MDBOOK_VERSION" --no-default-features \
    --features search
fi

mdbook build docs

python3 - docs/src <<'PY'
import os, re, sys

root = sys.argv[1]
pages = {}
for d, _, files in os.walk(root):
    for f in files:
        if f.endswith('.md'):
            p = os.path.join(d, f)
            pages[os.path.normpath(p)] = open(p, encoding='utf-8').read()

def without_code(text):
    """The text with fenced code blocks and inline code spans blanked out."""
    out, fence = [], False
    for line in text.split('\n'):
        if line.lstrip().startswith('```'):
            fence = not fence
            out.append('')
            continue
        out.append('' if fence else re.sub(r'`[^`]*`', '``', line))
    return out

def anchors(text):
    """The ids mdBook gives the page's headings."""
    seen, ids, fence = {}, set(), False
    for line in text.split('\n'):
        if line.lstrip().startswith('```'):
            fence = not fence
        if fence or not re.match(r'#{1,6} ', line):
            continue
        title = line.lstrip('#').strip()
        title = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', title)
        title = title.replace('`', '').replace('*', '')
        base = ''.join(c.lower() if (c.isalnum() or c in '_-') else '-' if c.isspace() else ''
                       for c in title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        ids.add(base if n == 0 else f'{base}-{n}')
    return ids

link = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
broken = []
for page, text in sorted(pages.items()):
    for no, line in enumerate(without_code(text), 1):
        for m in link.finditer(line):
            target = m.group(1)
            if re.match(r'^[a-z][a-z0-9+.-]*:', target) or target.startswith('//'):
                continue  # an absolute URL: not a link between pages
            path, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            where = f'{os.path.relpath(page)}:{no}: {target}'
            if not os.path.isfile(dest):
                broken.append(f'{where}: no such file')
            elif anchor and dest.endswith('.md') and anchor not in anchors(pages[dest]):
                broken.append(f'{where}: no heading with the id `{anchor}`')

summary = os.path.join(root, 'SUMMARY.md')
listed = {os.path.normpath(os.path.join(root, t))
          for t in re.findall(r'\]\(([^)]+\.md)\)', pages[summary])}
for page in sorted(set(pages) - listed - {os.path.normpath(summary)}):
    broken.append(f'{os.path.relpath(page)}: not listed in SUMMARY.md')

for b in broken:
    print(b, file=sys.stderr)
if broken:
    sys.exit(f'book: {len(broken)} broken links')
print(f'book: {len(pages)} pages, every link between them resolves')
PY
