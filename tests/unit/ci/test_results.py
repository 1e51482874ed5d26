"""The results of `envman ci run` (envman/ci/results.py): JUnit XML valid against a JUnit schema and
well formed whatever a row, a probe check or a runner field holds."""

import pytest

from envman.ci import results as ci
from tests.unit.conftest import DATA

XSD = DATA / "junit.xsd"


def schema():
    xmlschema = pytest.importorskip("xmlschema")
    return xmlschema.XMLSchema(str(XSD))


def test_junit_escapes_hostile_text_and_drops_control_characters():
    xsd = schema()
    row = {"row": "torch-1.0-cpu", "result": "fail", "started": "2024-01-01T00:00:00+00:00",
           "steps": {"build": {"status": "fail", "seconds": 1.0, "message": 'a <b> & "c" ]]>',
                               "detail": "log \x1b[31mred\x1b[0m \x00 end"}},
           "probe": {"checks": [{"name": "x<y", "status": "weird"}]}}
    xml = ci.junit_xml([row])
    xsd.validate(xml)
    assert "\x1b" not in xml and "\x00" not in xml


def test_schema_rejects_what_consumers_reject():
    xsd = schema()
    assert not xsd.is_valid('<testsuites><testsuite name="s" tests="x" failures="0" errors="0"/></testsuites>')
    assert not xsd.is_valid('<testsuites><testsuite name="s" tests="1" failures="0" errors="0">'
                               '<testcase name="c"/></testsuite></testsuites>')  # no classname
    assert xsd.is_valid('<testsuites><testsuite name="s" tests="1" failures="0" errors="0" time="0.5">'
                           '<testcase name="c" classname="k" time="0.5"><skipped message="m"/></testcase>'
                           '</testsuite></testsuites>')


XML_UNCARRIED = [chr(c) for c in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0xFFFE, 0xFFFF, 0xD800, 0xDFFF)]


@pytest.mark.parametrize("field", ["row", "check name", "check reason", "message", "detail", "hostname", "base_image",
                                   "image", "reason"])
def test_junit_is_well_formed_whatever_any_field_holds(field):
    """By rule: every text and attribute goes through one XML 1.0 filter (a row name, a probe check's
    name and reason come from an image; a host name from a runner)."""
    import xml.dom.minidom

    bad = "x" + "".join(XML_UNCARRIED) + "\x1b[31m\u202e<&>\"'y"
    row = {"row": "torch-1.0-cpu", "result": "fail", "started": "2024-01-01T00:00:00+00:00", "image": "img",
           "reason": "r", "runner": {"hostname": "h"}, "stack": {"base_image": "b"},
           "steps": {"build": {"status": "fail", "seconds": 1.0, "message": "m", "detail": "d"}},
           "probe": {"checks": [{"name": "cuda", "status": "fail", "reason": "why"}]}}
    if field == "row":
        row["row"] = bad
    elif field == "check name":
        row["probe"]["checks"][0]["name"] = bad
    elif field == "check reason":
        row["probe"]["checks"][0]["reason"] = bad
    elif field in ("message", "detail"):
        row["steps"]["build"][field] = bad
    elif field == "hostname":
        row["runner"]["hostname"] = bad
    elif field == "base_image":
        row["stack"]["base_image"] = bad
    else:
        row[field] = bad
    out = ci.junit_xml([row])
    xml.dom.minidom.parseString(out.encode("utf-8", "surrogatepass"))  # well-formed
    assert not any(c in out for c in XML_UNCARRIED)


def test_the_rows_that_fail_a_run_are_those_not_accepted():
    rows = [{"row": "a", "accepted": True}, {"row": "b", "accepted": False}, {"row": "c"}]
    assert ci.failed(rows) == ["b", "c"]
    assert ci.failed([]) == []


def test_an_empty_report_is_three_readable_files(tmp_path):
    import json
    import stat
    import xml.etree.ElementTree as ET

    paths = ci.write_report([], tmp_path / "rep")
    assert set(paths) == {"results", "junit", "summary"}
    assert json.loads(paths["results"].read_text()) == []
    assert ET.fromstring(paths["junit"].read_text()).get("tests") == "0"
    for p in paths.values():
        assert stat.S_IMODE(p.stat().st_mode) == 0o644
