from owl.cli import main

raise SystemExit(main())
