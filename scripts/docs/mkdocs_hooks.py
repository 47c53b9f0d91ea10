"""MkDocs hooks (mkdocs.yml: hooks), for the guide's site (scripts/build-docs.sh):

- The repository's README.md is the site's home page. docs/ holds no index.md of its own, so that
  the landing page is written once: README.md links into the guide as docs/guide/..., which from
  the site's root is guide/... (a link that leaves docs/ would be refused by the strict build).
- The flag references, reference/mxrun.md and reference/mxrun-master.md, are the Markdown that
  mxrun-man-pages writes from the programs' flag tables beside the manual pages (build/man/),
  taken from $MXRUN_REFERENCE_DIR and listed under "Reference". Without that variable (a bare
  `mkdocs serve`) the site has no flag reference: build-docs.sh always sets it.
"""
import os
import re

from mkdocs.structure.files import File

REFERENCE_PAGES = [("mxrun.md", "mxrun (flags)"), ("mxrun-master.md", "mxrun-master (flags)")]


def _reference_dir():
    folder = os.environ.get("MXRUN_REFERENCE_DIR", "")
    return folder if folder and os.path.isdir(folder) else None


def on_config(config):
    if _reference_dir():
        for section in config["nav"]:
            if isinstance(section, dict) and "Reference" in section:
                for name, title in reversed(REFERENCE_PAGES):
                    section["Reference"].insert(0, {title: f"reference/{name}"})
    return config


def on_files(files, config):
    readme = os.path.join(os.path.dirname(config.config_file_path), "README.md")
    with open(readme, encoding="utf-8") as f:
        home = re.sub(r"\]\(docs/", "](", f.read())
    files.append(File.generated(config, "index.md", content=home))
    folder = _reference_dir()
    if folder:
        for name, _ in REFERENCE_PAGES:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                files.append(File.generated(config, f"reference/{name}", content=f.read()))
    return files
