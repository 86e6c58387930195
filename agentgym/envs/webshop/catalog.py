"""The WebShop product catalogue: loading, price draws, and the ``agentgym data`` commands.

Two on-disk forms are read, both with the fields of the original engine (``web_agent_site/engine/engine.py``
``load_products`` in princeton-nlp/WebShop):

* the processed form ``documents_1k.jsonl`` (one ``{"id", "contents", "product"}`` per line, the file the
  original indexes with pyserini; ``product`` is already cleaned by ``load_products``), plus
  ``items_ins_v2_1000.json`` for the instruction attributes;
* the original raw form ``items_shuffle[_1000].json`` + ``items_ins_v2[_1000].json`` (+ ``items_human_ins.json``)
  that ``agentgym data download webshop`` fetches; raw products go through :func:`process_raw_product`, which
  applies the same cleaning rules as ``load_products``.

Prices: a product with a price range is sold at a price drawn uniformly in the range. The original draws it
from Python's unseeded global ``random`` (so it changes from run to run); we draw from
``random.Random(PRICE_SEED)``, in catalogue order, which is what the original does after ``random.seed(PRICE_SEED)``.
The same generator then draws the goals' price bounds (see :mod:`goals`), again in the original's order.
"""

from __future__ import annotations

import random
import re
import shutil
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from agentgym.data import (
    DataFileError,
    DataNotFoundError,
    check_file,
    download_file,
    family_dir,
    iter_jsonl,
    missing_message,
    read_json,
    restore_hint,
)

#: Seed of the generator that draws range prices and goal price bounds (the original leaves them unseeded).
PRICE_SEED = 0

#: Price of a product without pricing, as in the original.
DEFAULT_PRICE = 100.0

PROCESSED_FILE = "documents_1k.jsonl"
ATTR_FILES = ("items_ins_v2_1000.json", "items_ins_v2.json")
RAW_FILES = ("items_shuffle_1000.json", "items_shuffle.json")
HUMAN_FILE = "items_human_ins.json"

#: Where the original README points for the data (Google Drive ids of its setup.sh, small and full sets).
DOWNLOAD_URLS = {
    "items_shuffle_1000.json": "https://drive.google.com/uc?export=download&id=1EgHdxQ_YxqIQlvvq5iKlCrkEKR6-j0Ib",
    "items_ins_v2_1000.json": "https://drive.google.com/uc?export=download&id=1IduG0xl544V_A_jv3tHXC0kyFi7PnyBu",
    "items_human_ins.json": "https://drive.google.com/uc?export=download&id=14Kb5SPBk_jfdLZ_CDBNitW98QLDlKR5O",
}

_DROPPED_KEYS = (
    "product_information",
    "brand",
    "brand_url",
    "list_price",
    "availability_quantity",
    "availability_status",
    "total_reviews",
    "total_answered_questions",
    "seller_id",
    "seller_name",
    "fulfilled_by_amazon",
    "fast_track_message",
    "aplus_present",
    "small_description_old",
)


def index_text(product: dict[str, Any]) -> str:
    """The text the original indexes for a product (``search_engine/convert_product_file_format.py``)."""
    option_texts = [f"{name}: {', '.join(values)}" for name, values in product.get("options", {}).items()]
    bullets = product["BulletPoints"]
    return " ".join(
        [product["Title"], product["Description"], bullets[0] if bullets else "", ", and ".join(option_texts)]
    ).lower()


def _parse_pricing(pricing: Any) -> list[float]:
    """Raw pricing (``"$12.99 - $15.99"``) or an already-parsed list, to at most two floats."""
    if isinstance(pricing, list):
        return [float(p) for p in pricing[:2]] or [DEFAULT_PRICE]
    if not pricing:
        return [DEFAULT_PRICE]
    values = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in str(pricing).split("$")[1:]]
    return values[:2] or [DEFAULT_PRICE]


def process_raw_product(raw: dict[str, Any], attributes: dict[str, Any]) -> dict[str, Any]:
    """Clean one raw ``items_shuffle`` product as the original ``load_products`` does."""
    p = {k: v for k, v in raw.items() if k not in _DROPPED_KEYS}
    p["Title"] = p["name"]
    p["Description"] = p["full_description"]
    p["Reviews"] = []  # the original loads no reviews (its review file is commented out)
    p["Rating"] = "N.A."
    small = p["small_description"]
    p["BulletPoints"] = small if isinstance(small, list) else [small]
    pricing = _parse_pricing(p.get("pricing"))
    p["pricing"] = pricing
    p["Price"] = f"${pricing[0]}" if len(pricing) == 1 else f"${pricing[0]} to ${pricing[1]}"
    options: dict[str, list[str]] = {}
    option_to_image: dict[str, Any] = {}
    for name, contents in (p.get("customization_options") or {}).items():
        if contents is None:
            continue
        values = []
        for content in contents:
            value = content["value"].strip().replace("/", " | ").lower()
            values.append(value)
            option_to_image[value] = content.get("image")
        options[name.lower()] = values
    p["options"] = options
    p["option_to_image"] = option_to_image
    attr = attributes.get(p["asin"], {})
    p["Attributes"] = attr["attributes"] if "attributes" in attr else ["DUMMY_ATTR"]
    p["MainImage"] = p["images"][0] if p.get("images") else ""
    p["query"] = p["query"].lower().strip()
    return p


@dataclass
class Catalog:
    """The products of one WebShop data set, with their sale prices.

    Attributes:
        products: product dicts in catalogue (index) order, with the original engine's field names.
        by_asin: ``asin -> product``.
        prices: ``asin -> sale price`` (range prices drawn with ``random.Random(seed)``).
        texts: the lower-cased text indexed for search, one per product.
        human_instructions: ``asin -> list of human instruction records`` when the data has them.
        rng: the price generator after drawing the prices; goal price bounds continue from it.
        source: the file the products came from.
    """

    products: list[dict[str, Any]]
    by_asin: dict[str, dict[str, Any]]
    prices: dict[str, float]
    texts: list[str]
    human_instructions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.Random)
    source: str = ""

    def __len__(self) -> int:
        return len(self.products)


def draw_prices(products: list[dict[str, Any]], rng: random.Random) -> dict[str, float]:
    """Sale price per product: the single price, or uniform in the range (original ``generate_product_prices``)."""
    prices: dict[str, float] = {}
    for p in products:
        pricing = p["pricing"]
        if not pricing:
            prices[p["asin"]] = DEFAULT_PRICE
        elif len(pricing) == 1:
            prices[p["asin"]] = pricing[0]
        else:
            prices[p["asin"]] = rng.uniform(*pricing[:2])
    return prices


def _read_json(path: Path) -> Any:
    check_file(path, "webshop")
    return read_json(path, "webshop")


def find_data(folder: Path | None = None) -> Path:
    """The WebShop data folder (``$AGENTGYM_DATA/webshop`` unless given), checked to hold a catalogue."""
    path = Path(folder) if folder is not None else family_dir("webshop")
    if not path.is_dir():
        raise DataNotFoundError(missing_message("webshop", path))
    if not any((path / f).exists() for f in (PROCESSED_FILE, *RAW_FILES)):
        raise DataNotFoundError(
            f"{path} holds no WebShop catalogue ({PROCESSED_FILE} or {' / '.join(RAW_FILES)}). "
            + missing_message("webshop", path)
        )
    return path


def load_catalog(
    folder: str | Path | None = None, *, num_products: int | None = None, seed: int = PRICE_SEED
) -> Catalog:
    """Load products, attributes, human instructions and draw the sale prices.

    Args:
        folder: the data folder; default ``$AGENTGYM_DATA/webshop``.
        num_products: keep only the first N products (the original's ``num_products``).
        seed: seed of the price generator (see module docstring).

    Raises:
        DataNotFoundError: no catalogue in the folder; the message names the ``agentgym data`` command.
    """
    path = find_data(Path(folder) if folder is not None else None)
    attr_path = next((path / f for f in ATTR_FILES if (path / f).exists()), None)
    attributes: dict[str, Any] = _read_json(attr_path) if attr_path else {}
    human: dict[str, list[dict[str, Any]]] = {}
    if (path / HUMAN_FILE).exists():
        human = _read_json(path / HUMAN_FILE)

    products: list[dict[str, Any]] = []
    texts: list[str] = []
    seen: set[str] = set()
    processed = path / PROCESSED_FILE
    raw_path = next((path / f for f in RAW_FILES if (path / f).exists()), None)
    if processed.exists():
        source = processed
        check_file(processed, "webshop")
        for lineno, doc in iter_jsonl(processed, "webshop"):
            p = doc.get("product") if isinstance(doc, dict) else None
            if not isinstance(p, dict) or not isinstance(p.get("asin"), str):
                raise DataFileError(
                    f"{processed}, line {lineno}: not a WebShop document (expected {{'id', 'contents', 'product'}} "
                    "with product['asin']): " + restore_hint("webshop")
                )
            if p["asin"] in seen:
                continue
            seen.add(p["asin"])
            if "instructions" in p:
                human.setdefault(p["asin"], p.pop("instructions"))
            if attributes:
                attr = attributes.get(p["asin"], {})
                p["Attributes"] = attr["attributes"] if "attributes" in attr else ["DUMMY_ATTR"]
            products.append(p)
            texts.append(doc.get("contents") or index_text(p))
            if num_products is not None and len(products) >= num_products:
                break
    else:
        assert raw_path is not None
        source = raw_path
        raw = _read_json(raw_path)
        if num_products is not None:
            raw = raw[:num_products]  # the original assumes items_shuffle is shuffled already
        for r in raw:
            asin = r.get("asin")
            if not isinstance(asin, str) or asin == "nan" or len(asin) > 10 or asin in seen:
                continue
            seen.add(asin)
            p = process_raw_product(r, attributes)
            products.append(p)
            texts.append(index_text(p))
    if not products:  # an empty or cut file would only fail later, deep in the search index, naming no file
        raise DataFileError(f"{source}: holds no products (empty or cut file): " + restore_hint("webshop"))
    for p in products:
        attr = attributes.get(p["asin"], {})
        p["instruction_text"] = attr.get("instruction")
        p["instruction_attributes"] = attr.get("instruction_attributes")
    rng = random.Random(seed)
    prices = draw_prices(products, rng)
    return Catalog(
        products=products,
        by_asin={p["asin"]: p for p in products},
        prices=prices,
        texts=texts,
        human_instructions={a: v for a, v in human.items() if a in seen},
        rng=rng,
        source=str(source),
    )


# -- agentgym data prepare|download webshop ---------------------------------------------------------------
_KNOWN_FILES = (PROCESSED_FILE, *ATTR_FILES, *RAW_FILES, HUMAN_FILE)


def prepare(source: Path, dest: Path) -> Path:
    """Copy the WebShop files found in ``source`` into ``dest`` (``agentgym data prepare webshop --from DIR``)."""
    source = Path(source)
    found = [source / f for f in _KNOWN_FILES if (source / f).exists()]
    if not any(f.name in (PROCESSED_FILE, *RAW_FILES) for f in found):
        raise DataNotFoundError(
            f"{source} holds none of {PROCESSED_FILE}, {', '.join(RAW_FILES)}; point --from at the folder with the "
            "WebShop data (the original repo's data/ folder after its setup.sh)."
        )
    dest.mkdir(parents=True, exist_ok=True)
    for f in found:
        if f.resolve() != (dest / f.name).resolve():
            shutil.copyfile(f, dest / f.name)
    load_catalog(dest)  # fail now, not at the first reset, if the files do not load
    return dest


def download(dest: Path) -> Path:
    """Fetch the 1k WebShop data from the original's file host (``agentgym data download webshop``)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name, url in DOWNLOAD_URLS.items():
        target = dest / name
        if target.exists():
            continue
        tmp = dest / f".{name}.download"  # resumable (download_file); validated before it takes the real name
        try:
            download_file(url, tmp, timeout=120)
            read_json(tmp, "webshop")  # the host answers HTML pages for quota errors; refuse those
        except Exception as e:
            if isinstance(e, DataFileError):
                tmp.unlink(missing_ok=True)
            raise SystemExit(
                f"could not download {name} from {url}: {e}. Download the files by hand (see the WebShop README) "
                f"and run `agentgym data prepare webshop --from DIR`."
            ) from e
        tmp.rename(target)
    return dest
