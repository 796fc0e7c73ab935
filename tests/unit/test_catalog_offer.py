"""Catalog rows stay plain dataclasses until the SDK hands them out (so a
catalog-only `gpucloud offers` never imports pydantic), and must then be the
very Offer the model would have given: same fields, same JSON, same order."""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from decimal import Decimal
from pathlib import Path

import pytest

from gpucloud import Client, Offer
from gpucloud.catalog import bundled as catalog_mod
from gpucloud.catalog.bundled import load_catalogs
from gpucloud.catalog.offer import CatalogOffer, as_offers
from gpucloud.core.instructions import sort_offers


def test_fields_are_the_models_fields_in_its_order_with_its_defaults():
    fields = dataclasses.fields(CatalogOffer)
    assert [f.name for f in fields] == list(Offer.model_fields)
    for f in fields:
        model_field = Offer.model_fields[f.name]
        if f.default is dataclasses.MISSING:
            assert model_field.is_required(), f.name
        else:
            assert model_field.default == f.default, f.name


def every_row():
    catalogs = load_catalogs()
    for name in catalogs:
        for spot in (False, True):
            yield from catalogs[name].rows(spot=spot)


def test_every_bundled_row_dumps_as_its_offer_does():
    rows = list(every_row())
    assert len(rows) > 500  # every provider's rows, not a sample
    for row in rows:
        offer = row.to_offer()
        assert isinstance(offer, Offer)
        assert row.as_json() == offer.model_dump(mode="json"), row
        # Attribute for attribute, as the CLI reads them.
        for name in Offer.model_fields:
            assert getattr(row, name) == getattr(offer, name), (row, name)


def test_rows_and_offers_sort_alike():
    rows = list(every_row())
    by_rows = [(r.provider, r.instance_type, r.region, r.spot) for r in sort_offers(rows)]
    offers = sort_offers(as_offers(rows))
    assert by_rows == [(o.provider, o.instance_type, o.region, o.spot) for o in offers]


def test_an_implausible_row_is_refused_by_the_model_it_becomes():
    row = CatalogOffer(provider="x", instance_type="t", region="r", gpu="H100", gpu_count=1,
                       gpu_memory_gb=None, vcpus=None, memory_gb=None, disk_gb=None,
                       price_per_hour=Decimal(10) ** 7)
    with pytest.raises(ValueError, match="implausible price"):
        row.to_offer()


def test_the_sdk_hands_out_offers_for_catalog_rows():
    client = Client(use_keyring=False)
    found = client.offers(gpu="h100", count=8)
    assert found and all(type(o) is Offer for o in found)
    assert {o.source for o in found} == {"catalog"}


# -- the parsed-catalog cache -------------------------------------------------

def cache_files() -> list[Path]:
    return sorted((Path(os.environ["GPUCLOUD_HOME"]) / "cache" / "catalogs").glob("*.json"))


def test_a_parsed_file_is_kept_and_read_back_as_tomllib_gave_it():
    text = (catalog_mod._bundled_dir() / "lambda.toml").read_text(encoding="utf-8")
    first = catalog_mod._parsed("lambda.toml", text)
    [kept] = cache_files()
    assert json.loads(kept.read_bytes()) == tomllib.loads(text) == first
    assert catalog_mod._parsed("lambda.toml", text) == first


def test_the_cache_is_what_is_read_when_present():
    # Proof the second read comes from the file: one written by hand is believed.
    text = 'name = "x"\n'
    catalog_mod._parsed("x.toml", text)
    [kept] = cache_files()
    kept.write_text('{"name": "from the cache"}')
    assert catalog_mod._parsed("x.toml", text) == {"name": "from the cache"}


def test_an_edited_file_is_parsed_afresh():
    catalog_mod._parsed("x.toml", 'name = "before"\n')
    assert catalog_mod._parsed("x.toml", 'name = "after"\n') == {"name": "after"}
    assert len(cache_files()) == 2


@pytest.mark.parametrize("garbage", [b"", b"{not json", b"[1, 2]", b"\xff\xfe"])
def test_a_damaged_cache_file_is_parsed_over(garbage):
    text = 'name = "x"\nprice = "1.50"\n'
    catalog_mod._parsed("x.toml", text)
    [kept] = cache_files()
    kept.write_bytes(garbage)
    assert catalog_mod._parsed("x.toml", text) == {"name": "x", "price": "1.50"}
    assert json.loads(kept.read_bytes()) == {"name": "x", "price": "1.50"}  # mended


def test_no_cache_dir_is_only_a_slower_run():
    home = Path(os.environ["GPUCLOUD_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "cache").write_text("a file where the directory would go")
    assert catalog_mod._parsed("x.toml", 'name = "x"\n') == {"name": "x"}


def test_toml_dates_have_no_json_form_and_are_not_cached():
    data = catalog_mod._parsed("x.toml", "as_of = 2026-11-30\n")
    assert str(data["as_of"]) == "2026-11-30"
    assert cache_files() == []


def test_invalid_toml_is_still_a_configuration_error():
    from gpucloud.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="invalid TOML in x.toml"):
        catalog_mod._parsed("x.toml", "name = \n")
