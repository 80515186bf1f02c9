from mongopat.cli import main

main()
