"""Random file trees and the query templates asked over them (trusted task code).

A :class:`Tree` is a random folder at the sandbox's root (``/data``, ``/project``, ...)
with sub-folders, text, log, CSV and script files, a few empty ones. Each :class:`Family`
is one operation (count the lines of a file, delete the files of one extension, ...): how
it picks its arguments from a tree, its gold command, a second gold written otherwise, and
its phrasings, split in two disjoint sets: ``train`` phrasings make the public training
data, ``held_out`` phrasings make the generated validation and test items, so a system
that only memorised the training sentences meets new ones there.
"""

import random
from dataclasses import dataclass, field
from pathlib import Path

WORDS = ("alpha", "bravo", "cedar", "delta", "ember", "falcon", "garnet", "harbor", "indigo",
         "juniper", "kestrel", "lumen", "meadow", "nectar", "orbit", "pepper", "quartz",
         "raven", "sierra", "tundra", "umber", "velvet", "willow", "xenon", "yarrow", "zephyr",
         "amber", "basil", "cobalt", "dune", "fjord", "glacier", "hazel", "iris", "jasper",
         "kelp", "lotus", "maple", "nova", "onyx", "prism", "quill", "ridge", "saffron",
         "thistle", "vapor", "wren", "birch", "coral", "drift")
TOPS = ("data", "project", "work", "files", "archive", "site")
EXTENSIONS = ("txt", "log", "csv", "sh", "md", "py")
ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth"}


@dataclass
class Tree:
    """A random tree: ``folders`` and ``files`` (absolute path → text) under ``/<top>``."""

    top: str
    folders: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)

    def write(self, root: Path) -> None:
        for folder in self.folders:
            (root / folder.lstrip("/")).mkdir(parents=True, exist_ok=True)
        for path, text in self.files.items():
            target = root / path.lstrip("/")
            target.write_text(text)
            target.chmod(0o755 if path.endswith(".sh") else 0o644)

    def with_ext(self, ext: str, under: str) -> list[str]:
        return [p for p in self.files if p.endswith("." + ext) and p.startswith(under + "/")]


def random_lines(rng: random.Random, count: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))) for _ in range(count)]


def file_text(rng: random.Random, ext: str) -> str:
    if rng.random() < 0.08:
        return ""
    if ext == "csv":
        columns = rng.randint(3, 4)
        rows = [",".join(rng.choice(WORDS) if c else str(rng.randint(1, 999))
                         for c in range(columns)) for _ in range(rng.randint(3, 9))]
        return "\n".join(rows) + "\n"
    if ext == "sh":
        return "#!/bin/sh\necho " + rng.choice(WORDS) + "\n"
    lines = random_lines(rng, rng.randint(3, 14))
    if rng.random() < 0.5:
        lines += rng.sample(lines, rng.randint(1, min(3, len(lines))))
        rng.shuffle(lines)
    return "\n".join(lines) + "\n"


def random_tree(rng: random.Random) -> Tree:
    tree = Tree(top=rng.choice(TOPS))
    root = "/" + tree.top
    tree.folders = [root]
    for _ in range(rng.randint(3, 6)):
        parent = rng.choice(tree.folders)
        name = rng.choice(WORDS) + (str(rng.randint(1, 9)) if rng.random() < 0.3 else "")
        path = f"{parent}/{name}"
        if path not in tree.folders and parent.count("/") < 4:
            tree.folders.append(path)
    for _ in range(rng.randint(8, 16)):
        ext = rng.choice(EXTENSIONS)
        stem = rng.choice(WORDS)
        suffixes = ["", "_" + rng.choice(WORDS), str(rng.randint(1, 99))]
        name = stem + rng.choice(suffixes)
        tree.files.setdefault(f"{rng.choice(tree.folders)}/{name}.{ext}", file_text(rng, ext))
    return tree


# ------------------------------------------------------------------ arguments

def words_in(text: str) -> list[str]:
    return sorted({w for w in text.replace(",", " ").split() if w.isalpha()})


def pick_args(rng: random.Random, tree: Tree, needs: str) -> dict | None:
    """Arguments of one family from the tree, or ``None`` where the tree has none."""
    nonempty = sorted(p for p, t in tree.files.items() if t.strip() and not p.endswith(".sh"))
    folders = sorted(tree.folders)
    args: dict = {"dir": rng.choice(folders), "name": rng.choice(WORDS) + "_new",
                  "n": rng.randint(2, 5), "new": rng.choice(WORDS).upper(),
                  "text": " ".join(rng.sample(WORDS, 3))}
    if needs in ("file", "word"):
        if not nonempty:
            return None
        args["file"] = rng.choice(nonempty)
        args["out"] = args["file"].rsplit(".", 1)[0] + "_sorted.txt"
        found = words_in(tree.files[args["file"]])
        if needs == "word":
            if not found:
                return None
            args["word"] = rng.choice(found)
    elif needs == "ext":
        counts = [(d, e) for d in folders for e in EXTENSIONS if tree.with_ext(e, d)]
        if not counts:
            return None
        args["dir"], args["ext"] = rng.choice(counts)
    elif needs == "dirword":
        args["dir"] = rng.choice(folders)
        texts = " ".join(t for p, t in tree.files.items() if p.startswith(args["dir"] + "/"))
        if not words_in(texts):
            return None
        args["word"] = rng.choice(words_in(texts))
    elif needs == "csv":
        csvs = sorted(p for p, t in tree.files.items() if p.endswith(".csv") and t)
        if not csvs:
            return None
        args["file"] = rng.choice(csvs)
        args["k"] = rng.randint(1, 3)
        args["kth"] = ORDINALS[args["k"]]
    elif needs == "filedir":
        if not nonempty or len(folders) < 2:
            return None
        args["file"] = rng.choice(nonempty)
        others = [f for f in folders if f != args["file"].rsplit("/", 1)[0]]
        args["dir"] = rng.choice(others)
    elif needs == "subdir":
        subs = [f for f in folders if f.count("/") > 1]
        if not subs:
            return None
        args["dir"] = rng.choice(subs)
    return args


# ------------------------------------------------------------------ families

@dataclass(frozen=True)
class Family:
    name: str
    needs: str
    gold: str
    gold2: str
    train: tuple[str, ...]
    held_out: tuple[str, ...]


FAMILIES = (
    Family("count_lines", "file", "wc -l < {file}", "cat {file} | wc -l",
           ("Print only the number of lines in {file}",
            "How many lines does {file} have? Print just the number",
            "Count the lines of {file} and output only the count"),
           ("Tell me the length of {file} measured in rows of text, as a bare integer",
            "Report how long {file} is, in newline-ended rows; digits only")),
    Family("find_ext", "ext", "find {dir} -type f -name '*.{ext}'",
           "find {dir} -name '*.{ext}' -type f",
           ("Find all .{ext} files under {dir}",
            "List every file ending in .{ext} below {dir}, recursively",
            "Search {dir} recursively for files with the extension .{ext}"),
           ("Where below {dir} are the .{ext} documents? Give their locations",
            "Give me the locations of the .{ext} documents at any depth of {dir}")),
    Family("delete_ext", "ext", "find {dir} -type f -name '*.{ext}' -delete",
           "find {dir} -name '*.{ext}' -type f -exec rm {{}} +",
           ("Delete all .{ext} files under {dir}",
            "Remove every file ending in .{ext} from {dir} and its subfolders"),
           ("Get rid of the .{ext} files anywhere below {dir}",
            "Recursively erase files with extension .{ext} in {dir}")),
    Family("grep_lines", "word", "grep '{word}' {file}", "awk '/{word}/' {file}",
           ("Print the lines of {file} that contain '{word}'",
            "Show lines containing the word {word} in {file}"),
           ("Which lines of {file} mention {word}? Print them",
            "Display every line in {file} where '{word}' appears")),
    Family("grep_files", "dirword", "grep -rl '{word}' {dir}", "grep -lr '{word}' {dir}",
           ("List the files under {dir} that contain '{word}'",
            "Print the names of files in {dir}, recursively, that mention {word}"),
           ("Which files below {dir} include the text {word}? Print only their paths",
            "Show paths of files anywhere in {dir} whose contents have '{word}'")),
    Family("copy", "filedir", "cp {file} {dir}/", "cp {file} {dir}",
           ("Copy {file} into {dir}", "Make a copy of {file} in the folder {dir}"),
           ("Duplicate {file} so that {dir} holds an identical twin of it",
            "Clone {file} into {dir}, keeping the original")),
    Family("move", "filedir", "mv {file} {dir}/", "mv {file} {dir}",
           ("Move {file} into {dir}", "Move the file {file} to the folder {dir}"),
           ("Relocate {file} so it lives in {dir} from now on",
            "Shift {file} over to {dir}, leaving nothing behind")),
    Family("mkdir", "any", "mkdir -p {dir}/{name}", "mkdir {dir}/{name}",
           ("Create a directory named {name} inside {dir}", "Make a new folder {dir}/{name}"),
           ("Add an empty folder called {name} under {dir}",
            "Set up a new subdirectory {name} in {dir}")),
    Family("head", "file", "head -n {n} {file}", "sed -n '1,{n}p' {file}",
           ("Print the first {n} lines of {file}", "Show the top {n} lines of {file}"),
           ("Display the opening {n} lines of {file}", "Output lines 1 to {n} of {file}")),
    Family("tail", "file", "tail -n {n} {file}", "tail -{n} {file}",
           ("Print the last {n} lines of {file}", "Show the final {n} lines of {file}"),
           ("Display the closing {n} lines of {file}", "Output the bottom {n} lines of {file}")),
    Family("count_ext", "ext", "find {dir} -type f -name '*.{ext}' | wc -l",
           "find {dir} -name '*.{ext}' -type f | wc -l",
           ("Count the .{ext} files under {dir}",
            "How many files ending in .{ext} are there below {dir}? Print the number"),
           ("Give a tally of the .{ext} documents at any depth of {dir}",
            "What is the total of .{ext} documents stored beneath {dir}? Digits only")),
    Family("replace", "word", "sed -i 's/{word}/{new}/g' {file}",
           "sed -i -e 's/{word}/{new}/g' {file}",
           ("Replace every '{word}' with '{new}' in {file}",
            "In {file}, change all occurrences of {word} to {new}"),
           ("Substitute {new} for each {word} inside {file}, editing it in place",
            "Edit {file} so that {word} becomes {new} everywhere")),
    Family("chmod_x", "file", "chmod +x {file}", "chmod a+x {file}",
           ("Make {file} executable", "Give {file} execute permission"),
           ("Allow {file} to be run as a program", "Set the executable bit on {file}")),
    Family("sort_save", "file", "sort {file} > {out}", "sort -o {out} {file}",
           ("Sort the lines of {file} and save the result to {out}",
            "Write the lines of {file} in sorted order into {out}"),
           ("Store an alphabetically ordered copy of {file} at {out}",
            "Put the sorted contents of {file} in a new file {out}")),
    Family("unique_count", "file", "sort {file} | uniq | wc -l", "sort -u {file} | wc -l",
           ("Count the distinct lines in {file}",
            "How many unique lines does {file} have? Print the number"),
           ("Print the number of different lines in {file}",
            "Output how many lines of {file} are unique, ignoring repeats")),
    Family("empty_files", "any", "find {dir} -type f -empty", "find {dir} -empty -type f",
           ("List the empty files under {dir}", "Find files of size zero below {dir}"),
           ("Which files anywhere in {dir} have no content? Print their paths",
            "Show every zero-byte file inside {dir}")),
    Family("append", "file", "echo '{text}' >> {file}", "printf '%s\\n' '{text}' >> {file}",
           ("Append the line '{text}' to {file}", "Add '{text}' as a new last line of {file}"),
           ("Tack '{text}' onto the bottom of {file} as a fresh row",
            "Make '{text}' the new final row of {file}")),
    Family("column", "csv", "cut -d, -f{k} {file}", "awk -F, '{{print ${k}}}' {file}",
           ("Print column {k} of the comma-separated file {file}",
            "Show field {k} of every line of {file}, fields separated by commas"),
           ("Give the {kth} value of every record in {file}",
            "Pull the {kth} entry out of each record of {file}")),
    Family("list_dirs", "any", "find {dir} -mindepth 1 -type d",
           "find {dir} -mindepth 1 -type d -print",
           ("List all subdirectories of {dir}, recursively", "Print every folder below {dir}"),
           ("Which directories exist inside {dir} at any depth?",
            "Show every folder nested in {dir}, at all levels, as paths")),
    Family("remove_dir", "subdir", "rm -r {dir}", "rm -rf {dir}",
           ("Delete the folder {dir} and everything in it",
            "Remove the directory {dir} recursively"),
           ("Wipe out {dir} together with all it holds",
            "Make {dir} disappear, subfolders and all")),
)
FAMILY = {family.name: family for family in FAMILIES}


def draw(rng: random.Random, family: Family, held_out: bool) -> dict | None:
    """One query over a fresh random tree: ``{query, gold, gold2, family, tree}``."""
    tree = random_tree(rng)
    args = pick_args(rng, tree, family.needs)
    if args is None:
        return None
    phrasing = rng.choice(family.held_out if held_out else family.train)
    query = phrasing.format(**args)
    if rng.random() < 0.3 and not held_out:
        query = query[0].lower() + query[1:]
    return {"query": query, "gold": family.gold.format(**args),
            "gold2": family.gold2.format(**args), "family": family.name, "tree": tree}

